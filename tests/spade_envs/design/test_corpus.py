import importlib.util
import json
import logging
import random
import re
import tracemalloc
from array import array
from collections import Counter
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spade_envs.design.corpus import (
    MAX_CHARS_PER_WORD,
    SKIP_REASONS,
    Corpus,
    CorpusConfig,
    CorpusError,
    Document,
    truncate_words,
)
from spade_envs.envs.errors import SpadeEnvError

REPO = Path(__file__).resolve().parents[3]


def _load_prepare_corpus():
    spec = importlib.util.spec_from_file_location("prepare_corpus", REPO / "examples" / "data" / "prepare_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prepare_corpus = _load_prepare_corpus()


def _write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# ---------------------------------------------------------------- JSONL


def test_jsonl_skips_every_kind_of_bad_line_and_counts_it(tmp_path):
    lines = [
        json.dumps({"text": "plain text doc", "lang": "en"}),  # 1 valid, id from line
        "",  # 2 blank
        "   \t ",  # 3 blank
        "{not json",  # 4 invalid
        json.dumps([1, 2]),  # 5 not an object
        json.dumps("a string"),  # 6 not an object
        json.dumps({"title": "no text"}),  # 7 missing
        json.dumps({"text": None}),  # 8 missing (null)
        json.dumps({"text": ""}),  # 9 empty
        json.dumps({"orig_doc": "   "}),  # 10 empty
        json.dumps({"text": 42}),  # 11 non-string
        json.dumps({"orig_doc": ["x"]}),  # 12 non-string
        json.dumps({"orig_doc": "original", "text": "secondary", "id": "doc-7"}),  # 13 valid, orig_doc preferred
        json.dumps({"orig_doc": "", "text": "fallback text"}),  # 14 valid via text
        json.dumps({"text": "last line\n  keeps  spacing", "id": 5}),  # 15 valid, no trailing newline
    ]
    path = tmp_path / "docs.jsonl"
    path.write_bytes(("\n".join(lines)).encode("utf-8"))

    corpus = Corpus.load(path)

    assert len(corpus) == 4
    assert corpus.skipped == {
        "blank_line": 2,
        "invalid_json": 1,
        "not_an_object": 2,
        "missing_text": 2,
        "empty_text": 2,
        "non_string_text": 2,
    }
    assert set(corpus.skipped) == set(SKIP_REASONS)
    docs = [corpus.get(i) for i in range(len(corpus))]
    assert docs[0] == Document("docs.jsonl:1", "plain text doc", {"lang": "en"})
    assert docs[1] == Document("doc-7", "original", {"text": "secondary"})
    assert docs[2] == Document("docs.jsonl:14", "fallback text", {"orig_doc": ""})
    assert docs[3] == Document("5", "last line\n  keeps  spacing", {})


def test_invalid_utf8_line_counts_as_invalid_json(tmp_path):
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "\xff\xfe"}\n')
    corpus = Corpus.load(path)
    assert len(corpus) == 1
    assert corpus.skipped["invalid_json"] == 1


def test_get_rejects_out_of_range_index(tmp_path):
    corpus = Corpus.load(_write_jsonl(tmp_path / "a.jsonl", [{"text": "one"}]))
    for bad in (-1, 1, True, 0.0):
        with pytest.raises(IndexError, match=r"document index must be an int in \[0, 1\)"):
            corpus.get(bad)


def test_file_changed_after_indexing_is_reported(tmp_path):
    path = _write_jsonl(tmp_path / "a.jsonl", [{"text": "first"}, {"text": "second"}])
    corpus = Corpus.load(path)
    path.write_text("garbage that is not json at all\n" * 3, encoding="utf-8")
    with pytest.raises(CorpusError, match="changed after loading"):
        corpus.get(1)


def test_large_jsonl_index_holds_offsets_not_texts(tmp_path):
    path = tmp_path / "big.jsonl"
    filler = "lorem ipsum dolor sit amet " * 8
    with path.open("w", encoding="utf-8") as f:
        for i in range(50_000):
            f.write(json.dumps({"text": f"document {i} {filler}", "n": i}) + "\n")
    size = path.stat().st_size

    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    corpus = Corpus.load(path)
    retained = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
    tracemalloc.stop()

    assert len(corpus) == 50_000
    assert retained < size / 10, (retained, size)
    (source,) = corpus._sources
    held = {name: type(value) for name, value in vars(source).items()}
    assert held == {"path": type(path), "name": str, "skipped": dict, "_offsets": array, "_lines": array}
    assert source._offsets.itemsize * len(source._offsets) + source._lines.itemsize * len(source._lines) == 12 * 50_000
    assert corpus.get(49_999) == Document("big.jsonl:50000", f"document 49999 {filler}", {"n": 49_999})
    assert corpus.get(123).metadata == {"n": 123}


# ---------------------------------------------------------------- Parquet and saved datasets


def test_parquet_with_several_row_groups_reads_one_group_at_a_time(tmp_path):
    texts = [f"row {i}" for i in range(10)]
    texts[4] = None
    texts[7] = "  "
    table = pa.table({"text": texts, "id": [f"p{i}" if i % 2 else None for i in range(10)], "score": list(range(10))})
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path, row_group_size=3)
    assert pq.ParquetFile(path).num_row_groups == 4

    corpus = Corpus.load(path)

    assert len(corpus) == 8
    assert corpus.skipped["missing_text"] == 1
    assert corpus.skipped["empty_text"] == 1
    assert corpus.get(0) == Document("rows.parquet:0", "row 0", {"score": 0})
    assert corpus.get(3) == Document("p3", "row 3", {"score": 3})
    assert corpus.get(4) == Document("p5", "row 5", {"score": 5})
    source = corpus._sources[0]
    assert source._cache[0] == 1  # row 5 lives in group 1 (rows 3-5)
    assert corpus.get(7) == Document("p9", "row 9", {"score": 9})
    assert source._cache[0] == 3
    assert [corpus.get(i).text for i in range(8)] == [t for t in texts if t and t.strip()]


def test_parquet_without_text_column_and_with_orig_doc(tmp_path):
    pq.write_table(pa.table({"body": ["x", "y"]}), tmp_path / "none.parquet")
    pq.write_table(pa.table({"orig_doc": ["kept"], "text": ["metadata"]}), tmp_path / "orig.parquet")
    corpus = Corpus.load(tmp_path)
    assert len(corpus) == 1
    assert corpus.skipped["missing_text"] == 2
    assert corpus.get(0) == Document("orig.parquet:0", "kept", {"text": "metadata"})


def test_parquet_non_string_text_column_is_skipped(tmp_path):
    pq.write_table(pa.table({"text": [1, 2, 3]}), tmp_path / "ints.parquet")
    with pytest.raises(CorpusError, match="non_string_text=3"):
        Corpus.load(tmp_path / "ints.parquet")


def test_saved_hf_dataset(tmp_path):
    data = {"text": ["alpha doc", "", "gamma doc", None], "label": [1, 2, 3, 4]}
    datasets.Dataset.from_dict(data).save_to_disk(str(tmp_path / "saved"))

    corpus = Corpus.load(tmp_path / "saved")

    assert len(corpus) == 2
    assert corpus.skipped["empty_text"] == 1
    assert corpus.skipped["missing_text"] == 1
    assert corpus.get(0) == Document("saved:0", "alpha doc", {"label": 1})
    assert corpus.get(1) == Document("saved:2", "gamma doc", {"label": 3})


def test_saved_hf_dataset_dict_uses_every_split(tmp_path):
    splits = {
        "train": datasets.Dataset.from_dict({"orig_doc": ["t0", "t1"], "id": ["a", "b"]}),
        "test": datasets.Dataset.from_dict({"orig_doc": ["s0"], "id": ["c"]}),
    }
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "dd"))
    corpus = Corpus.load(tmp_path / "dd")
    assert [corpus.get(i).doc_id for i in range(len(corpus))] == ["c", "a", "b"]


def test_directory_of_mixed_files(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", [{"text": "a0"}, {"text": "a1"}, {"nope": 1}])
    pq.write_table(pa.table({"text": ["b0", "b1", "b2"]}), tmp_path / "b.parquet")
    _write_jsonl(tmp_path / "c.jsonl", [{"orig_doc": "c0"}])
    (tmp_path / "notes.txt").write_text("ignored: not a corpus format", encoding="utf-8")
    sub = tmp_path / "nested"
    sub.mkdir()
    _write_jsonl(sub / "d.jsonl", [{"text": "not globbed"}])

    corpus = Corpus.load(tmp_path)

    assert [corpus.get(i).text for i in range(len(corpus))] == ["a0", "a1", "b0", "b1", "b2", "c0"]
    assert [corpus.get(i).doc_id for i in (0, 3, 5)] == ["a.jsonl:1", "b.parquet:1", "c.jsonl:1"]
    assert corpus.skipped["missing_text"] == 1


def test_several_paths(tmp_path):
    a = _write_jsonl(tmp_path / "a.jsonl", [{"text": "a"}])
    b = _write_jsonl(tmp_path / "b.jsonl", [{"text": "b"}])
    corpus = Corpus(CorpusConfig.from_dict({"path": [str(b), str(a)]}))
    assert [corpus.get(i).text for i in range(2)] == ["b", "a"]


# ---------------------------------------------------------------- errors


def test_nothing_loads_names_paths_and_counts(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('\n{oops\n[1]\n{"text": ""}\n{"text": ""}\n', encoding="utf-8")
    with pytest.raises(CorpusError) as info:
        Corpus.load(path)
    message = str(info.value)
    assert str(path) in message
    assert "blank_line=1, invalid_json=1, not_an_object=1, empty_text=2" in message
    assert "'orig_doc' or 'text'" in message
    assert isinstance(info.value, SpadeEnvError)


def test_empty_file_and_empty_directory_and_unknown_paths(tmp_path):
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"no valid documents in corpus .*empty\.jsonl.*skipped: none"):
        Corpus.load(tmp_path / "empty.jsonl")
    (tmp_path / "dir").mkdir()
    with pytest.raises(CorpusError, match=r"has no \*\.jsonl or \*\.parquet files and is not a saved dataset"):
        Corpus.load(tmp_path / "dir")
    with pytest.raises(CorpusError, match="corpus path does not exist: .*missing.jsonl"):
        Corpus.load(tmp_path / "missing.jsonl")
    (tmp_path / "doc.csv").write_text("text\nhello\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"doc\.csv is neither \.jsonl nor \.parquet"):
        Corpus.load(tmp_path / "doc.csv")


def test_config_validation():
    assert CorpusConfig.from_dict({"path": "x.jsonl"}) == CorpusConfig(path="x.jsonl")
    assert CorpusConfig(path=["a", "b"]).path == ("a", "b")
    with pytest.raises(ValueError, match=re.escape("unknown corpus option(s) ['max_word']; known: ")):
        CorpusConfig.from_dict({"path": "x", "max_word": 3})
    with pytest.raises(ValueError, match="'path' is required"):
        CorpusConfig.from_dict({})
    with pytest.raises(ValueError, match="max_words_games must be a positive integer, got 0"):
        CorpusConfig(path="x", max_words_games=0)
    with pytest.raises(ValueError, match="path must be a non-empty path"):
        CorpusConfig(path="")
    with pytest.raises(ValueError, match="seed must be an integer"):
        CorpusConfig(path="x", seed="1")
    with pytest.raises(ValueError, match="setting must be one of"):
        CorpusConfig(path="x").max_words("chess")
    assert CorpusConfig(path="x").max_words("tool_use") == 4000


def test_logs_indexed_and_skipped_counts(tmp_path, caplog):
    path = _write_jsonl(tmp_path / "a.jsonl", [{"text": "a"}, {"text": "b"}, {"x": 1}])
    with caplog.at_level(logging.INFO, logger="spade_envs.design.corpus"):
        Corpus.load(path)
    assert "indexed 2 documents from a.jsonl (skipped: missing_text=1)" in caplog.text
    assert "corpus: 2 documents from 1 source(s)" in caplog.text


# ---------------------------------------------------------------- sampling and truncation


def test_seeded_sampling_is_reproducible_and_uniform(tmp_path):
    n_docs = 20
    path = _write_jsonl(tmp_path / "u.jsonl", [{"text": f"doc {i}"} for i in range(n_docs)])
    corpus = Corpus.load(path)

    first = [corpus.sample(random.Random(7)).doc_id for _ in range(3)]
    rng_a, rng_b = random.Random(123), random.Random(123)
    seq_a = [corpus.sample(rng_a).doc_id for _ in range(50)]
    seq_b = [corpus.sample(rng_b).doc_id for _ in range(50)]
    assert seq_a == seq_b
    assert len(set(first)) == 1
    assert seq_a != [corpus.sample(random.Random(124)).doc_id for _ in range(50)]

    draws = 20_000
    rng = random.Random(0)
    counts = Counter(corpus.sample(rng).text for _ in range(draws))
    assert len(counts) == n_docs
    expected = draws / n_docs
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 60, chi2  # 19 degrees of freedom: p(chi2 > 43.8) = 0.001


def test_truncate_words_is_exact_and_keeps_whitespace():
    text = "one  two\n\nthree\tfour five"
    assert truncate_words(text, 5) == text
    assert truncate_words(text, 50) == text
    assert truncate_words(text, 3) == "one  two\n\nthree\n[... document truncated at 3 words ...]"
    assert truncate_words("  lead  ing  ", 1) == "  lead\n[... document truncated at 1 words ...]"
    assert truncate_words("", 3) == ""
    long = " ".join(f"w{i}" for i in range(10_000))
    cut = truncate_words(long, 1234)
    kept, marker = cut.rsplit("\n", 1)
    assert kept.split() == [f"w{i}" for i in range(1234)]
    assert marker == "[... document truncated at 1234 words ...]"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_words must be a positive integer"):
            truncate_words(text, bad)


def test_truncation_caps_characters_too():
    """A no-space (CJK) document is one "word": it used to pass whole (400k characters into a designer prompt)."""
    cjk = "文" * 400_000
    cut = truncate_words(cjk, 6000)
    kept, marker = cut.rsplit("\n", 1)
    assert len(kept) == 6000 * MAX_CHARS_PER_WORD and marker == "[... document truncated at 48000 characters ...]"
    spaced = "abcdefghij " * 100  # 100 words of 10 letters: within 100 words, over 8 x 100 characters
    kept, marker = truncate_words(spaced, 100).rsplit("\n", 1)
    assert kept.split() == ["abcdefghij"] * 72 and marker.endswith("800 characters ...]")  # cut at a space
    assert truncate_words("ab cd", 2, max_chars=5) == "ab cd"
    with pytest.raises(ValueError, match="max_chars must be a positive integer"):
        truncate_words("ab", 1, max_chars=0)


def test_sample_text_applies_the_setting_budget(tmp_path):
    long = " ".join(f"w{i}" for i in range(7000))
    corpus = Corpus.load(_write_jsonl(tmp_path / "l.jsonl", [{"text": long}]))
    games = corpus.sample_text(random.Random(1), "games")
    tools = corpus.sample_text(random.Random(1), "tool_use")
    assert len(games.split("\n")[0].split()) == 6000 and games.endswith("[... document truncated at 6000 words ...]")
    assert len(tools.split("\n")[0].split()) == 4000
    small = Corpus.load(tmp_path / "l.jsonl", max_words_games=10)
    assert small.sample_text(random.Random(1), "games").startswith("w0 w1 w2 w3 w4 w5 w6 w7 w8 w9\n[...")
    with pytest.raises(ValueError, match="setting must be one of"):
        corpus.sample_text(random.Random(1), "chess")


def test_sample_corpus_ships_clean():
    corpus = Corpus.load(REPO / "examples" / "data" / "sample_corpus.jsonl")
    assert 8 <= len(corpus) <= 12
    assert sum(corpus.skipped.values()) == 0
    ids = {corpus.get(i).doc_id for i in range(len(corpus))}
    assert len(ids) == len(corpus)
    assert all(len(corpus.get(i).text.split()) > 100 for i in range(len(corpus)))


# ---------------------------------------------------------------- prepare_corpus.py


def test_prepare_corpus_from_folder(tmp_path, capsys):
    src = tmp_path / "docs"
    (src / "sub").mkdir(parents=True)
    (src / ".hidden").mkdir()
    (src / "a.txt").write_text("alpha beta gamma delta\n", encoding="utf-8")
    (src / "sub" / "b.md").write_text("# Title\n\nsome markdown words here", encoding="utf-8")
    (src / "empty.txt").write_text("  \n\n", encoding="utf-8")
    (src / "short.md").write_text("two words", encoding="utf-8")
    (src / "binary.txt").write_bytes(b"\xff\xfe\x00bad")
    (src / "skip.csv").write_text("not,read", encoding="utf-8")
    (src / ".hidden" / "c.txt").write_text("hidden file words words", encoding="utf-8")
    out = tmp_path / "out" / "corpus.jsonl"

    assert prepare_corpus.main([str(src), str(out), "--min-words", "3"]) == 0

    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert records == [
        {"id": "a.txt", "text": "alpha beta gamma delta", "source": "docs"},
        {"id": "sub/b.md", "text": "# Title\n\nsome markdown words here", "source": "docs"},
    ]
    assert "wrote 2 documents" in capsys.readouterr().out
    corpus = Corpus.load(out)
    assert corpus.get(1) == Document("sub/b.md", "# Title\n\nsome markdown words here", {"source": "docs"})


def test_prepare_corpus_reports_skips_and_fails_when_nothing_written(tmp_path, capsys):
    src = tmp_path / "docs"
    src.mkdir()
    (src / "empty.txt").write_text("", encoding="utf-8")
    (src / "short.txt").write_text("one", encoding="utf-8")
    out = tmp_path / "corpus.jsonl"
    assert prepare_corpus.main([str(src), str(out), "--min-words", "2"]) == 1
    assert "skipped: empty=1, too_short=1" in capsys.readouterr().err
    assert not out.exists()
    assert not list(tmp_path.glob(".*partial"))
    assert prepare_corpus.main([str(tmp_path / "missing"), str(out)]) == 2
    assert prepare_corpus.main([str(src), str(out), "--min-words", "0"]) == 2


def test_prepare_corpus_from_saved_dataset(tmp_path, capsys):
    data = {"content": ["first document text", "", None, "second document"], "id": ["x1", "x2", "x3", None]}
    datasets.Dataset.from_dict(data).save_to_disk(str(tmp_path / "hf"))
    out = tmp_path / "corpus.jsonl"

    assert prepare_corpus.main([str(tmp_path / "hf"), str(out), "--text-column", "content"]) == 0

    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert records == [
        {"id": "x1", "text": "first document text", "source": "hf"},
        {"id": "hf:3", "text": "second document", "source": "hf"},
    ]
    assert "skipped: empty=1, not_text=1" in capsys.readouterr().out
    assert prepare_corpus.main([str(tmp_path / "hf"), str(out), "--text-column", "body"]) == 2
    assert "has no column 'body'" in capsys.readouterr().err
    assert len(Corpus.load(out)) == 2
