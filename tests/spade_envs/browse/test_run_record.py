"""The run record's writer and reader (browse/run_record.py): caps, append-only, resume cut, concurrent reads."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml

from spade_envs.browse.run_record import RECORD_FILE, RecordCaps, RunRecord, read_record

ROOT = Path(__file__).resolve().parents[3]


def design(step: int, n: int = 0, **extra) -> dict:
    return {"kind": "design", "step": step, "design": n, "skill": "logic", "verdict": "rejected",
            "code": "syntax_error", **extra}  # fmt: skip


def transcript(turns: int, chars: int) -> dict:
    return {"seed": 1, "outcome": 0.0, "turns": [{"role": "prompt", "text": "P" * chars + "first-observation"}]
            + [{"role": "agent" if i % 2 else "env", "text": "x" * chars} for i in range(turns)]}  # fmt: skip


def test_the_yaml_block_documents_the_writers_defaults():
    block = yaml.safe_load((ROOT / "recipe/spade/config/spade/default.yaml").read_text())["spade"]["record"]
    assert RecordCaps.from_dict(block) == RecordCaps()


def test_bad_caps_are_refused_by_name():
    with pytest.raises(ValueError, match=r"unknown keys \['transcript_per_arm'\]"):
        RecordCaps.from_dict({"transcript_per_arm": 2})
    with pytest.raises(ValueError, match="spade.record.max_mb must be a number >= 0"):
        RecordCaps.from_dict({"max_mb": -1})


def test_texts_are_capped_and_say_so(tmp_path):
    caps = RecordCaps(source_chars=100, doc_chars=10, hint_chars=20, transcripts_per_arm=1, transcript_chars=1000)
    record = RunRecord(tmp_path, caps)
    record.write(design(0, source="s" * 500, doc_head="d" * 50, hint="h" * 50,
                        transcripts={"no_hint": [transcript(8, 400), transcript(1, 1)], "hint": []}))  # fmt: skip
    header, entry = read_record(tmp_path)
    assert header["kind"] == "header" and header["caps"]["source_chars"] == 100
    assert entry["source"].startswith("s" * 100) and "400 characters cut by spade.record" in entry["source"]
    assert entry["doc_head"].startswith("d" * 10) and len(entry["hint"]) < 80
    kept = entry["transcripts"]["no_hint"]
    assert len(kept) == 1 and entry["transcripts"]["hint"] == []
    text = "".join(turn["text"] for turn in kept[0]["turns"])
    assert len(text) < 1500 and kept[0]["turns"][0]["text"].endswith("first-observation")  # the prompt keeps its tail
    assert kept[0]["turns"][-1]["role"] == "note" and "more turns cut" in kept[0]["turns"][-1]["text"]


def test_past_max_mb_entries_keep_their_numbers_but_not_their_texts(tmp_path):
    record = RunRecord(tmp_path, RecordCaps(max_mb=0.01))
    for n in range(3):
        record.write(design(0, n, source="s" * 6000, reward=0.5))
    entries = read_record(tmp_path)[1:]
    assert [e.get("compact", False) for e in entries] == [False, False, True]
    assert "source" not in entries[2] and entries[2]["reward"] == 0.5 and entries[2]["code"] == "syntax_error"


def test_the_file_is_append_only_across_writers_and_off_means_no_file(tmp_path):
    RunRecord(tmp_path, RecordCaps()).write(design(0))
    before = (tmp_path / RECORD_FILE).read_bytes()
    RunRecord(tmp_path, RecordCaps()).write(design(1))  # a second writer (a restarted pool) appends, no new header
    after = (tmp_path / RECORD_FILE).read_bytes()
    assert after.startswith(before) and [e["kind"] for e in read_record(tmp_path)] == ["header", "design", "design"]
    off = tmp_path / "off"
    off.mkdir()
    assert RunRecord(off, RecordCaps(enable=False)).write(design(0)) is False
    assert not (off / RECORD_FILE).exists()


def test_a_resume_cuts_the_steps_after_the_checkpoint_and_a_torn_last_line(tmp_path):
    record = RunRecord(tmp_path, RecordCaps())
    for step in range(4):
        record.write(design(step))
    with (tmp_path / RECORD_FILE).open("a") as f:
        f.write('{"kind": "design", "step": 1, "sou')  # a crash mid-line
    assert record.truncate_after(1) == 3
    resumed = RunRecord(tmp_path, RecordCaps())
    for step in (2, 3):
        resumed.write(design(step))
    assert [e.get("step") for e in read_record(tmp_path)] == [None, 0, 1, 2, 3]
    assert resumed.size == (tmp_path / RECORD_FILE).stat().st_size


def test_a_reader_during_writes_sees_only_whole_entries(tmp_path):
    record = RunRecord(tmp_path, RecordCaps(source_chars=300_000))
    path = tmp_path / RECORD_FILE
    done = threading.Event()

    def write() -> None:
        for n in range(40):
            record.write(design(0, n, source=str(n % 10) * 250_000))
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    seen = 0
    while not done.is_set() or seen < 41:
        entries = read_record(path)
        assert len(entries) >= seen  # never fewer than before, each one whole
        for e in entries[1:]:
            assert e["source"] == str(e["design"] % 10) * 250_000
        seen = len(entries)
    writer.join()
    assert seen == 41 and json.loads(path.read_text().splitlines()[-1])["design"] == 39
