"""nearest() equals brute-force cosine search over the stored vectors; a new text's query runs through the model;
qk_map() is the PCA of queries and keys each translated to their shared mean."""

from __future__ import annotations

import numpy as np
import pytest
import torch


def brute_force(vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    v = vectors.astype(np.float64)
    q = query.astype(np.float64)
    scores = v @ q / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return order, scores[order]


def row_of(corpus, text_id: int, position: int) -> int:
    tokens = corpus._token_rows()
    return int(np.flatnonzero((tokens[0] == text_id) & (tokens[1] == position))[0])


@pytest.mark.parametrize("layer", [1, 4])
def test_nearest_to_a_stored_token_equals_brute_force(small_corpus, layer):
    vectors = small_corpus.vectors(layer)
    text_ids, positions, tokens = small_corpus._token_rows()
    assert len(vectors) == len(text_ids) == small_corpus.sql("select count(*) as n from tokens")["n"][0]
    for text_id, position in [(0, 1), (31, 3), (12, 0)]:
        query = vectors[row_of(small_corpus, text_id, position)]
        rows, scores = brute_force(vectors, query, 12)
        got = small_corpus.nearest(text_id, position, layer, k=12)
        assert list(got.columns) == ["text_id", "position", "token", "left", "right", "score"]
        assert got["score"].to_numpy() == pytest.approx(scores, abs=1e-5)
        assert list(zip(got["text_id"], got["position"])) == list(zip(text_ids[rows], positions[rows]))
        assert got["text_id"][0] == text_id and got["position"][0] == position  # itself, score 1
        assert list(got["token"]) == [tokens[r] for r in rows]
        assert small_corpus.nearest(text_id, position, layer, k=12, exact=False).equals(got)  # no graph: exact


def test_a_small_corpus_has_no_graph_and_a_large_one_is_searched_through_its_own(small_corpus, minilm, small_texts,
                                                                                 tmp_path, monkeypatch):
    from bertviz_lab.corpus import analyze, vectors

    assert not (small_corpus.path / "index").exists()
    monkeypatch.setattr(vectors, "EXACT_UP_TO", 100)  # the small texts' ~500 tokens count as a large corpus
    monkeypatch.setattr(vectors, "SEGMENT_ROWS", 128)  # and their graphs come in segments
    large = analyze(*minilm, small_texts, tmp_path / "indexed", vectors=("hidden",), layers=[1, 4], batch_size=8,
                    progress=False)
    rows = len(large.vectors(1))
    segments = -(-rows // 128)
    assert segments >= 3 and large.manifest["index_segment_rows"] == 128
    assert sorted(p.name for p in (large.path / "index").iterdir()) == [
        f"hidden-L{layer}-{j:05d}.usearch" for layer in (1, 4) for j in range(segments)]
    exact_searches = []
    real_exact_search = vectors.exact_search
    monkeypatch.setattr(vectors, "exact_search", lambda *a: exact_searches.append(a) or real_exact_search(*a))
    for layer in (1, 4):
        stored = large.vectors(layer)
        rows, scores = brute_force(stored, stored[row_of(large, 12, 3)], 10)
        approximate = large.nearest(12, 3, layer, k=10)  # through the graphs: on ~128 vectors HNSW finds all
        assert approximate["score"].to_numpy() == pytest.approx(scores, abs=1e-5) and not exact_searches
        exact = large.nearest(12, 3, layer, k=10, exact=True)
        assert exact["score"].to_numpy() == pytest.approx(scores, abs=1e-5) and len(exact_searches) == 1
        assert list(zip(exact["text_id"], exact["position"])) == list(zip(*[large._token_rows()[i][rows]
                                                                            for i in (0, 1)]))
        exact_searches.clear()

def test_index_segments_hold_each_row_once_under_its_row_number(tmp_path, monkeypatch):
    """Streamed from the shards' memory-mapped files in chunks that end inside and at the ends of shards and
    segments: segment j holds rows j * SEGMENT_ROWS onward under their row numbers, each vector as stored (float16)."""
    from usearch.index import Index

    from bertviz_lab.corpus import vectors

    rng = np.random.default_rng(0)
    shards = []
    for index, rows in enumerate((1200, 900, 1500)):
        folder = tmp_path / f"{index:05d}"
        folder.mkdir()
        np.save(folder / "hidden-L1.npy", rng.standard_normal((rows, 64)).astype(np.float16))
        shards.append(folder)
    monkeypatch.setattr(vectors, "CHUNK_ROWS", 500)
    whole = vectors.stacked(shards, "hidden-L1.npy")
    names = vectors.index_files(1, len(whole), 1000)
    assert names == [f"hidden-L1-{j:05d}.usearch" for j in range(4)]
    vectors.build_index(shards, "hidden-L1.npy", [tmp_path / name for name in names], 1000, threads=2)
    for j, name in enumerate(names):
        segment = Index.restore(str(tmp_path / name), view=True)
        keys = np.arange(j * 1000, min((j + 1) * 1000, len(whole)), dtype=np.uint64)
        assert len(segment) == len(keys) and segment.dtype.name == "F16"
        assert np.array_equal(np.stack(segment.get(keys, dtype=np.float32)), whole[keys])
    assert not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(ValueError, match="no shard holds hidden-L1.npy"):
        vectors.build_index([], "hidden-L1.npy", [tmp_path / "none.usearch"], 1000)
    assert not (tmp_path / "none.usearch").exists()
    with pytest.raises(ValueError, match="holds 3600 vectors: 3 index segments of 1200, not the 4 asked for"):
        vectors.build_index(shards, "hidden-L1.npy", [tmp_path / name for name in names[:3]] + [tmp_path / "x"],
                            1200)


def test_a_search_through_segments_merges_them_best_first(tmp_path):
    """Each segment answers its own k; the merged answer is the k best over all, ties to the lower row, as the
    exact search orders them (on a few hundred vectors a segment's graph finds its true neighbours)."""
    from bertviz_lab.corpus import vectors

    rng = np.random.default_rng(1)
    folder = tmp_path / "00000"
    folder.mkdir()
    stored = rng.standard_normal((700, 32)).astype(np.float16)
    stored[650] = stored[10]  # a tie across segments
    np.save(folder / "hidden-L0.npy", stored)
    paths = [tmp_path / name for name in vectors.index_files(0, 700, 250)]
    vectors.build_index([folder], "hidden-L0.npy", paths, 250)
    query = stored[10].astype(np.float32)
    rows, scores = vectors.search([folder], paths, 0, query, 8, None, 700, 250)
    exact_rows, exact_scores = vectors.search([folder], paths, 0, query, 8, True, 700, 250)
    assert rows.tolist()[:2] == [10, 650] and rows.tolist() == exact_rows.tolist()
    assert scores == pytest.approx(exact_scores, abs=1e-3)


def test_gathered_rows_equal_the_stacked_ones(tmp_path):
    from bertviz_lab.corpus import vectors

    rng = np.random.default_rng(2)
    shards = []
    for index, rows in enumerate((5, 1, 9)):
        shards.append(tmp_path / f"{index:05d}")
        shards[-1].mkdir()
        np.save(shards[-1] / "q.npy", rng.standard_normal((rows, 4)).astype(np.float16))
    whole = vectors.stacked(shards, "q.npy")
    for rows in ([0, 4, 5, 6, 14], [5], [], list(range(15))):
        picked = vectors.gathered(shards, "q.npy", np.array(rows, dtype=np.int64))
        assert picked.dtype == np.float32 and np.array_equal(picked, whole[rows])


def test_nearest_gives_the_context_of_each_match(small_corpus):
    got = small_corpus.nearest(31, 2, 4, k=5)
    for row in got.itertuples():
        tokens = small_corpus.tokens(row.text_id)
        assert tokens[row.position] == row.token
        assert row.left == " ".join(tokens[max(0, row.position - 5):row.position])
        assert row.right == " ".join(tokens[row.position + 1:row.position + 6])


def test_nearest_to_new_text_runs_it_through_the_model(small_corpus, minilm):
    model, tokenizer = minilm
    text = "The old fisherman repaired a broken clock."
    enc = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        _, cache = model.run_with_cache(**enc, names_filter="encoder.layer.4.hidden")
    query = cache["encoder.layer.4.hidden"][0, 3].half().float().numpy()
    rows, scores = brute_force(small_corpus.vectors(4), query, 8)
    got = small_corpus.nearest(text, 3, 4, k=8)
    assert got["score"].to_numpy() == pytest.approx(scores, abs=1e-5)
    assert list(got["text_id"]) == list(small_corpus._token_rows()[0][rows])


def test_qk_map_is_the_pca_of_queries_and_keys_at_a_shared_mean(small_corpus):
    n = 40
    got = small_corpus.qk_map(2, 7, n=n, seed=3)
    assert list(got.columns) == ["kind", "text_id", "position", "token", "x", "y"]
    assert list(got["kind"]) == ["query"] * n + ["key"] * n
    queries = got[got["kind"] == "query"].reset_index(drop=True)
    keys = got[got["kind"] == "key"].reset_index(drop=True)
    assert (queries[["text_id", "position", "token"]] == keys[["text_id", "position", "token"]]).all().all()
    text_ids, positions, _ = small_corpus._token_rows()
    rows = [row_of(small_corpus, t, p) for t, p in zip(queries["text_id"], queries["position"])]
    assert len(set(rows)) == n
    q = np.concatenate([np.load(d / "q-L2-H7.npy") for d in small_corpus._shard_dirs()])[rows].astype(np.float64)
    k = np.concatenate([np.load(d / "k-L2-H7.npy") for d in small_corpus._shard_dirs()])[rows].astype(np.float64)
    points = np.concatenate([q - q.mean(0), k - k.mean(0)])
    _, _, vh = np.linalg.svd(points - points.mean(0), full_matrices=False)
    expected = (points - points.mean(0)) @ vh[:2].T
    got_xy = got[["x", "y"]].to_numpy()
    for axis in range(2):  # the same axes up to sign
        sign = np.sign(expected[:, axis] @ got_xy[:, axis])
        assert got_xy[:, axis] == pytest.approx(sign * expected[:, axis], abs=1e-6)
    assert small_corpus.qk_map(2, 7, n=n, seed=3).equals(got)  # the same sample for the same seed
    assert len(small_corpus.qk_map(2, 7, n=10 ** 6)) == 2 * len(text_ids)  # n above the corpus: every token


def test_stored_queries_are_the_models_queries(small_corpus, minilm):
    model, tokenizer = minilm
    a, b = small_corpus.text(31)
    enc = tokenizer(a, b, return_tensors="pt")
    with torch.no_grad():
        _, cache = model.run_with_cache(**enc, names_filter=["encoder.layer.5.attention.self.q",
                                                              "encoder.layer.5.attention.self.k"])
    text_ids, _, _ = small_corpus._token_rows()
    rows = np.flatnonzero(text_ids == 31)
    for kind in ("q", "k"):
        stored = np.concatenate([np.load(d / f"{kind}-L5-H9.npy") for d in small_corpus._shard_dirs()])[rows]
        expected = cache[f"encoder.layer.5.attention.self.{kind}"][0, 9].numpy()
        assert stored.astype(np.float32) == pytest.approx(expected, abs=2e-2, rel=1e-2)  # stored as float16


def test_qk_heads_keep_the_queries_and_keys_of_a_few_heads_and_the_statistics_of_all(minilm, small_texts, tmp_path,
                                                                                      small_corpus):
    from bertviz_lab.corpus import analyze

    model, tokenizer = minilm
    few = analyze(model, tokenizer, small_texts, tmp_path / "few", vectors=("qk",), layers=[2, 5], qk_heads=[9, 7],
                  batch_size=5, shard_size=8, progress=False)
    assert few.heads == list(range(12)) and few.qk_heads == [(2, 7), (2, 9), (5, 7), (5, 9)]
    assert sorted(p.name for p in few._shard_dirs()[0].glob("*.npy")) == [
        "k-L2-H7.npy", "k-L2-H9.npy", "k-L5-H7.npy", "k-L5-H9.npy",
        "q-L2-H7.npy", "q-L2-H9.npy", "q-L5-H7.npy", "q-L5-H9.npy"]
    for name in ("q-L5-H9.npy", "k-L2-H7.npy"):  # the same vectors as a run that keeps every head's
        ours = np.concatenate([np.load(d / name) for d in few._shard_dirs()])
        every = np.concatenate([np.load(d / name) for d in small_corpus._shard_dirs()])
        assert np.array_equal(ours, every)
    assert few.qk_map(5, 7, n=20, seed=1).equals(small_corpus.qk_map(5, 7, n=20, seed=1))
    with pytest.raises(ValueError, match=r"head \(5, 3\) has no stored queries and keys; this corpus stores those of "
                                         r"\(2, 7\), \(2, 9\), \(5, 7\), \(5, 9\)\."):
        few.qk_map(5, 3)
    assert len(few.head_stats()) == 2 * 12


def test_qk_heads_need_qk_vectors_and_existing_heads(minilm, small_texts, tmp_path):
    from bertviz_lab.corpus import analyze

    model, tokenizer = minilm
    with pytest.raises(ValueError, match=r"qk_heads=\[1\] names heads whose queries and keys to keep, but "
                                         r"vectors=\('hidden',\) keeps none: add 'qk' to vectors"):
        analyze(model, tokenizer, small_texts, tmp_path / "a", vectors=("hidden",), qk_heads=[1])
    with pytest.raises(ValueError, match=r"head 12 does not exist: the model has 12 heads \(0-11\)"):
        analyze(model, tokenizer, small_texts, tmp_path / "b", vectors=("qk",), qk_heads=[3, 12])
