"""A corpus folder is data, never code: folders made by someone else (SQL-literal breakouts in every manifest string,
traversal, absolute paths, symbolic links out, wrong types, huge or deep manifests, truncated, swapped and edited
files) open with one ValueError line naming the file or field, and nothing reads or writes a byte outside the folder:
a marker file the payloads try to write stays absent, and a canary table beside the folder stays unread."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bertviz_lab.corpus import SENTENCES, Corpus, analyze

TEXTS = SENTENCES.read_text(encoding="utf-8").splitlines()[:12]
SHARD = "shards/00000"


@pytest.fixture(scope="module")
def made(minilm, tmp_path_factory) -> Path:
    """One honest corpus (3 shards, hidden vectors and queries/keys of layer 1) that each case copies and damages."""
    model, tokenizer = minilm
    out = tmp_path_factory.mktemp("made") / "corpus"
    analyze(model, tokenizer, TEXTS, out, layers=[1], vectors=("hidden", "qk"), qk_heads=[0], shard_size=5,
            progress=False)
    return out


@pytest.fixture
def room(made, tmp_path) -> Path:
    """A copy of the honest corpus in `tmp_path/room/corpus`, beside a canary table that nothing may read."""
    corpus = tmp_path / "room" / "corpus"
    shutil.copytree(made, corpus)
    pq.write_table(pa.table({"secret": ["canary"]}), tmp_path / "room" / "canary.parquet")
    return corpus


def marker(corpus: Path) -> Path:
    """Where the payloads try to write."""
    return corpus.parent / "pwned.csv"


def breakout(corpus: Path) -> str:
    """A string that, formatted into SQL inside '...', would write the marker file."""
    return f"x') to '{marker(corpus)}'; copy (select 1) to '{marker(corpus)}'; --"


def edit_manifest(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(corpus: Path) -> None:
        path = corpus / "manifest.json"
        manifest = json.loads(path.read_text(encoding="utf-8"))
        change(manifest)
        path.write_text(json.dumps(manifest), encoding="utf-8")
    return apply


def set_field(name: str, value: object) -> Callable[[Path], None]:
    return edit_manifest(lambda manifest: manifest.__setitem__(name, value))


def set_shard(index: int, key: str, value: object) -> Callable[[Path], None]:
    return edit_manifest(lambda manifest: manifest["shards"][index].__setitem__(key, value))


def write(relative: str, data: bytes) -> Callable[[Path], None]:
    return lambda corpus: (corpus / relative).write_bytes(data)


def truncate(relative: str, keep: float) -> Callable[[Path], None]:
    def apply(corpus: Path) -> None:
        data = (corpus / relative).read_bytes()
        (corpus / relative).write_bytes(data[:int(len(data) * keep)])
    return apply


def link_out(relative: str, target: str) -> Callable[[Path], None]:
    """Replace `relative` with a symbolic link to `target` (relative to the folder's parent)."""
    def apply(corpus: Path) -> None:
        path = corpus / relative
        source = corpus.parent / target
        if path.is_dir() and not path.is_symlink():
            shutil.copytree(path, source, dirs_exist_ok=True)
            shutil.rmtree(path)
        else:
            if not source.exists():
                shutil.copy(path, source)
            path.unlink()
        path.symlink_to(source)
    return apply


def swap(a: str, b: str) -> Callable[[Path], None]:
    def apply(corpus: Path) -> None:
        first, second = (corpus / a).read_bytes(), (corpus / b).read_bytes()
        (corpus / a).write_bytes(second)
        (corpus / b).write_bytes(first)
    return apply


def drop_vector_rows(relative: str, rows: int) -> Callable[[Path], None]:
    def apply(corpus: Path) -> None:
        array = np.load(corpus / relative)
        np.save(corpus / relative, array[:-rows])
    return apply


def change_vector_dtype(relative: str) -> Callable[[Path], None]:
    return lambda corpus: np.save(corpus / relative, np.load(corpus / relative).astype(np.float64))


DAMAGE = {  # name: (what is done to the folder, words the one-line error holds)
    "shard name breaks out of a SQL literal": (
        lambda c: set_shard(0, "name", breakout(c))(c), "field 'shards[0].name'"),
    "shard name climbs out": (set_shard(0, "name", "../../canary"), "field 'shards[0].name'"),
    "shard name is an absolute path": (set_shard(0, "name", "/etc"), "field 'shards[0].name'"),
    "shard name out of order": (set_shard(1, "name", "00007"), "field 'shards[1].name'"),
    "shard entry with another key": (set_shard(0, "path", "/etc"), "field 'shards[0]'"),
    "shard of no texts": (set_shard(0, "texts", 0), "field 'shards[0].texts'"),
    "shard with fewer tokens than texts": (set_shard(0, "tokens", 2), "field 'shards[0].tokens'"),
    "token count off by five": (
        edit_manifest(lambda m: m["shards"][1].__setitem__("tokens", m["shards"][1]["tokens"] + 5)),
        "shards/00001/tokens.parquet holds"),
    "texts that do not add up": (set_field("num_texts", 13), "field 'num_texts' says 13"),
    "num_texts as a string": (set_field("num_texts", "12"), "field 'num_texts'"),
    "num_heads as a boolean": (set_field("num_heads", True), "field 'num_heads'"),
    "num_heads of zero": (set_field("num_heads", 0), "field 'num_heads'"),
    "a negative layer": (set_field("layers", [-1]), "field 'layers[0]'"),
    "layers as a string": (set_field("layers", "1; drop"), "field 'layers'"),
    "no layers": (set_field("layers", []), "field 'layers' is empty"),
    "a head beyond num_heads": (set_field("heads", [0, 99]), "field 'heads[1]'"),
    "a repeated head": (set_field("heads", [0, 0]), "field 'heads' repeats"),
    "an unknown vector kind": (set_field("vectors", ["hidden", "'; drop"]), "field 'vectors'"),
    "vector layers that were not analysed": (set_field("vector_layers", [4]), "field 'vector_layers'"),
    "a malformed query-key pair": (set_field("qk_heads", [[1]]), "field 'qk_heads'"),
    "max_length of zero": (set_field("max_length", 0), "field 'max_length'"),
    "index segments of a string": (set_field("index_segment_rows", "1; drop"), "field 'index_segment_rows'"),
    "index segments of zero vectors": (set_field("index_segment_rows", 0), "field 'index_segment_rows'"),
    "an index segment that is missing": (set_field("index_segment_rows", 100), "hidden-L1-00000.usearch is missing"),
    "a hash that is not hex": (lambda c: set_field("hash", breakout(c))(c), "field 'hash'"),
    "model_name that is not a string": (set_field("model_name", {"repo": "x"}), "field 'model_name'"),
    "model_name with a line break": (set_field("model_name", "a\nb"), "field 'model_name'"),
    "a missing field": (edit_manifest(lambda m: m.pop("shards")), "field 'shards' is missing"),
    "shards that are no list": (set_field("shards", "00000"), "field 'shards'"),
    "a manifest that is a list": (write("manifest.json", b"[1, 2]"), "holds a list"),
    "a manifest that is no JSON": (write("manifest.json", b"{'complete': true"), "is not JSON"),
    "a manifest that is not UTF-8": (write("manifest.json", b'{"complete": "\xff\xfe"}'), "is not JSON"),
    "a manifest nested too deep": (write("manifest.json", b"[" * 200_000 + b"]" * 200_000), "is not JSON"),
    "a manifest not marked complete": (set_field("complete", "yes"), "not marked complete"),
    "the manifest is a link out": (link_out("manifest.json", "elsewhere.json"), "manifest.json is a symbolic link"),
    "a shard folder is a link out": (link_out(SHARD, "outside"), "shards/00000 is a symbolic link"),
    "the shards folder is a link out": (link_out("shards", "outside"), "shards is a symbolic link"),
    "a table is a link to the canary": (link_out(f"{SHARD}/texts.parquet", "canary.parquet"),
                                        "texts.parquet is a symbolic link"),
    "head_stats is a link out": (link_out("head_stats.parquet", "stats.parquet"),
                                 "head_stats.parquet is a symbolic link"),
    "a vector file is a link out": (link_out(f"{SHARD}/hidden-L1.npy", "hidden.npy"),
                                    "hidden-L1.npy is a symbolic link"),
    "a truncated table": (truncate(f"{SHARD}/tokens.parquet", 0.5), "tokens.parquet is not a readable Parquet"),
    "an empty table": (truncate(f"{SHARD}/texts.parquet", 0.0), "texts.parquet is not a readable Parquet"),
    "a table swapped between shards": (swap(f"{SHARD}/tokens.parquet", "shards/00001/tokens.parquet"),
                                       "tokens.parquet holds"),
    "a foreign table in place of one": (
        lambda c: pq.write_table(pa.table({"secret": ["x"] * 3}), c / SHARD / "texts.parquet"),
        "texts.parquet holds 3 rows"),
    "a table that is a folder": (lambda c: ((c / SHARD / "texts.parquet").unlink(),
                                            (c / SHARD / "texts.parquet").mkdir()), "not a regular file"),
    "a missing table": (lambda c: (c / SHARD / "text_stats.parquet").unlink(), "text_stats.parquet is missing"),
    "a missing shard": (lambda c: shutil.rmtree(c / "shards/00002"), "shard 00002 listed in manifest.json is missing"),
    "20 vector rows removed": (drop_vector_rows(f"{SHARD}/hidden-L1.npy", 20), "hidden-L1.npy holds"),
    "a truncated vector file": (truncate(f"{SHARD}/q-L1-H0.npy", 0.7), "q-L1-H0.npy is"),
    "vectors of another dtype": (change_vector_dtype(f"{SHARD}/k-L1-H0.npy"), "k-L1-H0.npy holds float64"),
    "a vector file that is no .npy": (write(f"{SHARD}/hidden-L1.npy", b"PK\x03\x04 not numpy"), "is not a .npy"),
    "a missing vector file": (lambda c: (c / SHARD / "k-L1-H0.npy").unlink(), "k-L1-H0.npy is missing"),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_or_hostile_folder_is_one_line_naming_the_file_or_field(room, name):
    damage, words = DAMAGE[name]
    damage(room)
    with pytest.raises(ValueError) as raised:
        Corpus.open(room).head_stats()
    message = str(raised.value)
    assert words in message, message
    assert "\n" not in message and len(message) < 600, message
    assert not marker(room).exists()


def test_the_huge_manifest_is_refused_before_it_is_parsed(room, monkeypatch):
    from bertviz_lab.corpus import manifest

    monkeypatch.setattr(manifest, "MAX_MANIFEST_BYTES", 4096)
    (room / "manifest.json").write_text(json.dumps({"complete": True, "pad": "x" * 5000}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"manifest.json: 5,\d{3} bytes, more than a manifest holds \(4,096\)"):
        Corpus.open(room)


def test_sql_breakouts_in_every_manifest_string_run_nothing(room):
    """model_name is free text: it passes the schema and is shown, but it is never SQL, and never loaded."""
    edit_manifest(lambda m: m.__setitem__("model_name", breakout(room)))(room)
    corpus = Corpus.open(room)
    assert corpus.model_name == breakout(room)
    assert len(corpus.head_stats()) == 12 and len(corpus.top_texts(1, 0, "cls", k=3)) == 3
    with pytest.raises(ValueError, match="never loads by itself"):
        corpus.nearest("The river bank.", 1, 1)
    assert not marker(room).exists()


def test_the_connection_reads_the_folders_tables_and_nothing_else(room):
    corpus = Corpus.open(room)
    assert corpus.sql("select count(*) as n from tokens")["n"][0] == sum(
        entry["tokens"] for entry in corpus.manifest["shards"])
    canary = room.parent / "canary.parquet"
    refused = [f"select * from read_parquet('{canary}')", f"select * from read_csv('{room}/settings.json')",
               f"copy (select 1) to '{marker(room)}'", f"copy (select 1) to '{room}/shards/x.csv'",
               "set enable_external_access = true", "set lock_configuration = false",
               f"attach '{room.parent / 'db.duckdb'}' as other", "install httpfs"]
    for query in refused:
        with pytest.raises(Exception) as raised:
            corpus.sql(query)
        assert type(raised.value).__name__ in ("PermissionException", "InvalidInputException"), (query, raised.value)
    assert not marker(room).exists() and not (room / "shards" / "x.csv").exists()
    assert not (room.parent / "db.duckdb").exists()


def test_a_bad_index_segment_is_one_line_naming_it(room, tmp_path):
    from usearch.index import Index

    rows = sum(entry["tokens"] for entry in json.loads((room / "manifest.json").read_text())["shards"])
    set_field("index_segment_rows", rows - 10)(room)  # two segments: the second holds 10 vectors
    (room / "index").mkdir()
    first, second = room / "index" / "hidden-L1-00000.usearch", room / "index" / "hidden-L1-00001.usearch"
    first.write_bytes(b"not an index" * 100)
    small = Index(ndim=384, metric="cos", dtype="f16")
    small.add(np.arange(3, dtype=np.uint64), np.ones((3, 384), np.float16))
    small.save(str(second))
    corpus = Corpus.open(room)
    with pytest.raises(ValueError) as raised:
        corpus.nearest(0, 1, 1)
    assert "hidden-L1-00000.usearch is not a usearch index" in str(raised.value) and "\n" not in str(raised.value)
    assert len(corpus.nearest(0, 1, 1, exact=True)) == 10  # the exact search reads the vectors themselves
    first.unlink()
    shutil.copy(second, first)
    with pytest.raises(ValueError, match="hidden-L1-00000.usearch holds 3 vectors of 384 dimensions where the corpus "
                                         f"stores {rows - 10} vectors of 384 there; the folder is damaged"):
        Corpus.open(room).nearest(0, 1, 1)
    first.unlink()
    first.symlink_to(room.parent / "canary.parquet")
    with pytest.raises(ValueError, match="hidden-L1-00000.usearch is a symbolic link"):
        Corpus.open(room)


@pytest.mark.parametrize("name", ["bob's corpus", 'a "q" b', "back\\slash; drop"])
def test_folders_with_quotes_and_backslashes_in_their_names_work(minilm, tmp_path, name):
    model, tokenizer = minilm
    corpus = analyze(model, tokenizer, TEXTS[:6], tmp_path / name / name, layers=[1], vectors="hidden",
                     shard_size=4, progress=False)
    reopened = Corpus.open(tmp_path / name / name)
    assert len(reopened.head_stats()) == 12 and reopened.text(5) == corpus.text(5)
    assert len(reopened.top_texts(1, 3, "entropy", k=2)) == 2
    assert len(reopened.nearest(0, 1, 1, k=3)) == 3


def test_opening_a_folder_that_names_a_hub_model_sends_no_request(room, child_env):
    """The Hub endpoint points at a recorder on this machine: opening the folder, its tables, a search by text id
    and one by new text (refused) send nothing; a Hub download in the same process does reach the recorder."""
    edit_manifest(lambda m: m.__setitem__("model_name", "attacker-org/tracking-bert"))(room)
    requests: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            requests.append(self.path)
            self.send_response(404)
            self.end_headers()

        do_HEAD = do_GET  # noqa: N815

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = textwrap.dedent(f"""
        import sys
        from bertviz_lab.corpus import Corpus
        corpus = Corpus.open({str(room)!r})
        corpus.head_stats(); corpus.nearest(0, 1, 1, k=2)
        try:
            corpus.nearest("The river bank.", 1, 1)
        except ValueError as error:
            print("refused:", error)
        print("requests before the control:", flush=True)
        sys.stdin.readline()  # the test has read the recorder by now
        from huggingface_hub import hf_hub_download
        try:
            hf_hub_download("attacker-org/tracking-bert", "config.json", cache_dir={str(room.parent / "hub")!r})
        except Exception as error:
            print("control:", type(error).__name__)
    """)
    env = {**child_env, "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}", "HF_HUB_OFFLINE": "0",
           "TRANSFORMERS_OFFLINE": "0", "HF_HUB_ETAG_TIMEOUT": "5", "HF_HUB_DOWNLOAD_TIMEOUT": "5"}
    try:
        done = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        before_control, refused = None, []
        for line in done.stdout:
            if line.startswith("requests before the control"):
                before_control = list(requests)
                done.stdin.write("go\n")
                done.stdin.close()
            refused += [line] if line.startswith("refused:") else []
        done.wait(timeout=300)
        assert done.returncode == 0, done.stderr.read()
    finally:
        server.shutdown()
    assert before_control == [] and len(refused) == 1 and "never loads by itself" in refused[0]
    assert any("tracking-bert" in path for path in requests), requests  # the recorder does see what reaches it


def test_a_table_removed_after_the_folder_was_opened_is_named_by_the_query_that_needs_it(room):
    corpus = Corpus.open(room)
    os.remove(room / SHARD / "texts.parquet")
    with pytest.raises(Exception, match="texts.parquet"):
        corpus.sql("select count(*) from texts")
