"""``spade-envs browse``'s site, built from a record file (the browser test on a real run: test_demo_on_cpu.py)."""

from __future__ import annotations

import json
import re
import threading
import urllib.request

from spade_envs.browse.html import highlight_python
from spade_envs.browse.run_record import RECORD_FILE, RecordCaps, RunRecord, read_record
from spade_envs.browse.site import site_server
from spade_envs.cli.main import main

MARKUP = "<script>document.documentElement.dataset.pwned = 'yes'</script>"


def write_run(run_dir, designs: int = 3) -> None:
    record = RunRecord(run_dir, RecordCaps())
    turns = [{"role": "prompt", "text": f"play {MARKUP}"}, {"role": "agent", "text": "\\boxed{1}", "reward": 1.0},
             {"role": "env", "text": "<b>you win</b>"}]  # fmt: skip
    for n in range(designs):
        admitted = n == 0
        record.write({"kind": "design", "step": n // 2, "design": n % 2, "skill": "logic", "doc_id": f"doc {MARKUP}",
                      "doc_head": MARKUP, "verdict": "admitted" if admitted else "rejected",
                      "code": None if admitted else "syntax_error", "reason": MARKUP,
                      "source": "class Env:\n    x = 'a'  # c\n" if admitted else f"class A(:  # {MARKUP}",
                      "source_kind": "admitted" if admitted else "extracted", "hint": MARKUP, "hint_text": MARKUP,
                      "seeds": [7, 8], "arms": {"no_hint": [0.0, 1.0], "hint": [1.0, 1.0], "placebo": [0.0, 0.0]},
                      "transcripts": {arm: [{"seed": 7, "outcome": 1.0, "rewards": [1.0], "turns": turns}]
                                      for arm in ("no_hint", "hint", "placebo")}})  # fmt: skip
    record.write({"kind": "scores", "step": 0, "designer": [{"design": 0, "reward": 0.25, "advantage": 1.5}],
                  "agent": [{"env_id": "e", "seed": 3, "reward": 1.0, "advantage": 0.5, "session": "0"}]})  # fmt: skip
    played = {"seed": 3, "outcome": 1.0, "turns": turns}
    record.write({"kind": "episode", "step": 0, "slot": 0, "env_id": "e", "skill": "logic", "seed": 3,
                  "outcome": 1.0, "fault": None, "transcript": played})  # fmt: skip
    rows = [{"spade/step": 0, "spade/propose/validity_rate": 0.5, "spade/propose/failure/syntax_error": 1,
             "spade/memory_size": 5}, {"spade/step": 1, "spade/memory_size": 6}]  # fmt: skip
    (run_dir / "spade_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_site_lists_every_design_escapes_env_text_and_joins_scores(tmp_path, capsys):
    run_dir = tmp_path / "spade"
    run_dir.mkdir()
    write_run(run_dir)
    with (run_dir / RECORD_FILE).open("a") as f:
        f.write('{"kind": "design", "step": 5, "design": 0, "sk')  # a run in progress: a line being written
    assert main(["browse", str(tmp_path)]) == 0  # a launcher's RUN_DIR holding spade/
    index = run_dir / "browse" / "index.html"
    assert capsys.readouterr().out.strip() == str(index)
    site = {p.relative_to(index.parent).as_posix(): p.read_text() for p in index.parent.rglob("*.html")}
    assert sorted(site) == ["designs.html", "designs/s0-d0.html", "designs/s0-d1.html", "designs/s1-d0.html",
                            "episodes.html", "index.html"]  # fmt: skip
    for name, text in site.items():
        assert "<script>document" not in text, name  # env text only ever as text
        assert len(re.findall(r"<script>", text)) <= 1 and "Content-Security-Policy" in text
    assert "&lt;script&gt;document.documentElement" in site["designs/s0-d1.html"]
    assert site["designs.html"].count('<tr class="') == 3 and 'data-reward="0.25"' in site["designs.html"]
    admitted = site["designs/s0-d0.html"]
    assert '<span class="kw">class</span> Env:' in admitted and '<span class="com"># c</span>' in admitted
    assert "<td>1.500</td>" in admitted and admitted.count('class="transcript"') == 3
    assert "agent (reward 1.00)" in admitted and "env reward per turn: 1.00" in admitted
    assert "<polyline" in site["index.html"] and "syntax_error" in site["index.html"]
    assert "1.00 / 0.50" in site["episodes.html"]


def test_broken_code_is_highlighted_up_to_the_error_then_shown_plain():
    html = highlight_python('x = "a<b"\nclass B(:\n  y = """unterminated <i>')
    assert '<span class="str">&quot;a&lt;b&quot;</span>' in html and "&lt;i&gt;" in html and "<i>" not in html


def test_a_folder_without_a_run_is_a_clear_error(tmp_path, capsys):
    assert main(["browse", str(tmp_path)]) == 2
    assert "holds no SPADE run" in capsys.readouterr().err


def test_a_run_without_designs_still_builds(tmp_path):
    write_run(tmp_path, designs=0)
    assert main(["browse", str(tmp_path), "--out", str(tmp_path / "site")]) == 0
    assert "0 of 0" in (tmp_path / "site" / "designs.html").read_text().replace('<span id="shown">0</span>', "0")


def test_the_served_site_rebuilds_on_each_visit_of_the_overview(tmp_path):
    write_run(tmp_path, designs=1)
    server = site_server(tmp_path, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        RunRecord(tmp_path, RecordCaps()).write(
            {"kind": "design", "step": 4, "design": 1, "skill": "logic", "verdict": "rejected", "code": "no_code_block"}
        )  # the run goes on
        assert "<title>SPADE run overview</title>" in urllib.request.urlopen(url + "/").read().decode()
        table = urllib.request.urlopen(url + "/designs.html").read().decode()
        assert table.count('<tr class="') == 2 and 'href="designs/s4-d1.html"' in table
    finally:
        server.shutdown()
        server.server_close()


def test_a_line_separator_in_env_text_hides_no_later_entry(tmp_path):
    record = RunRecord(tmp_path, RecordCaps())  # JSON keeps U+2028 / U+0085 raw; only "\n" ends an entry
    record.write(
        {"kind": "design", "step": 0, "design": 0, "skill": "s", "verdict": "rejected", "reason": "a\u2028b\x85c"}
    )
    record.write({"kind": "design", "step": 0, "design": 1, "skill": "s", "verdict": "rejected"})
    assert [e.get("design") for e in read_record(tmp_path)] == [None, 0, 1]
    assert record.truncate_after(0) == 0 and len(read_record(tmp_path)) == 3


def test_a_lone_surrogate_in_env_text_neither_stops_the_record_nor_the_site(tmp_path):
    RunRecord(tmp_path, RecordCaps()).write(
        {"kind": "design", "step": 0, "design": 0, "skill": "s", "verdict": "rejected", "reason": "x\ud800y"}
    )
    hostile = {"kind": "design", "step": 0, "design": 1, "skill": "s", "verdict": "rejected", "reason": "p\udfffq"}
    with (tmp_path / RECORD_FILE).open("a") as f:
        f.write(json.dumps(hostile) + "\n")  # as a hostile run could write it: an escaped lone surrogate
    assert main(["browse", str(tmp_path), "--out", str(tmp_path / "site")]) == 0
    assert "x?y" in (tmp_path / "site" / "designs" / "s0-d0.html").read_text()
    assert "p?q" in (tmp_path / "site" / "designs" / "s0-d1.html").read_text()


def test_highlighting_counts_lines_as_the_tokenizer_does():
    html = highlight_python("x = '\u2028\x0c'\nimport os  # c\n")
    assert '<span class="kw">import</span> os  <span class="com"># c</span>' in html


def test_a_hostile_record_with_odd_types_in_place_of_numbers_and_text_still_builds(tmp_path):
    play = {
        "seed": 1,
        "outcome": 10**400,
        "rewards": ["<b>x</b>"],
        "turns": [{"role": "agent", "text": {"a": 1}, "reward": "y"}],
    }
    entry = {"kind": "design", "step": 0, "design": 0, "skill": "s", "verdict": "rejected", "source": 123,
             "reward": "<i>r</i>", "seeds": [1], "arms": {"no_hint": "ab"},
             "transcripts": {"no_hint": [play]}}  # fmt: skip
    (tmp_path / RECORD_FILE).write_text(json.dumps(entry) + "\n")
    assert main(["browse", str(tmp_path), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "designs" / "s0-d0.html").read_text()
    assert "&lt;i&gt;r&lt;/i&gt;" in page and "&lt;b&gt;x&lt;/b&gt;" in page and "<i>r" not in page
