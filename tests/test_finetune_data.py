"""bertlab.finetune.data readers and bertlab.finetune.encoding on tiny files written here:
every format reads, malformed records name their file and line, tagging labels only first
pieces, and QA windows map answers to tokens and back to the original characters."""

import json
import sys

import pytest
import torch

from bertlab.errors import DataError, InputError
from bertlab.finetune.data import (
    QAExample,
    SequenceExample,
    TaggingExample,
    load_task_data,
    read_conll,
    read_conllu,
    read_glue,
    read_squad,
    split_examples,
)
from bertlab.finetune.encoding import (
    IGNORE,
    collate,
    decode_qa,
    decode_tagging,
    encode_qa,
    encode_sequences,
    encode_tagging,
)
from bertlab.finetune.tasks import UPOS_TAGS, get_task


def write(path, text, bom=False):
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


# --- GLUE ----------------------------------------------------------------------------------
def test_sst2_header_and_trailing_space(tmp_path):
    p = write(tmp_path / "train.tsv", "sentence\tlabel\nthe cat sat \t1\na dog ran \t0\n")
    ex = read_glue(get_task("sst2"), p)
    assert [(e.text_a, e.text_b, e.label) for e in ex] == [("the cat sat", None, "1"), ("a dog ran", None, "0")]
    assert ex[1].source.endswith("train.tsv:3")


def test_sst2_bad_label_names_file_and_line(tmp_path):
    p = write(tmp_path / "dev.tsv", "sentence\tlabel\ngood \t1\nbad \t2\n")
    with pytest.raises(DataError, match=r"dev\.tsv:3: label '2'"):
        read_glue(get_task("sst2"), p)


def test_cola_has_no_header_and_four_columns(tmp_path):
    p = write(tmp_path / "train.tsv", "gj04\t1\t\tThe cat sat.\ngj04\t0\t*\tCat the sat.")  # no final newline
    ex = read_glue(get_task("cola"), p)
    assert [(e.text_a, e.label) for e in ex] == [("The cat sat.", "1"), ("Cat the sat.", "0")]
    bad = write(tmp_path / "bad.tsv", "gj04\t1\t\tfine\ngj04\t1\tonly three\n")
    with pytest.raises(DataError, match=r"bad\.tsv:2: 3 tab-separated fields, expected 4"):
        read_glue(get_task("cola"), bad)


def test_mrpc_bom_header(tmp_path):
    p = write(tmp_path / "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe ran.\tHe was running.\n",
              bom=True)
    ex = read_glue(get_task("mrpc"), p)
    assert (ex[0].text_a, ex[0].text_b, ex[0].label) == ("He ran.", "He was running.", "1")


def test_pair_tasks_read_by_header(tmp_path):
    rte = write(tmp_path / "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA cat.\tAn animal.\tentailment\n")
    assert read_glue(get_task("rte"), rte)[0].label == "entailment"
    qnli = write(tmp_path / "qnli.tsv", "index\tquestion\tsentence\tlabel\n0\tWho?\tAnn did.\tnot_entailment\n")
    assert read_glue(get_task("qnli"), qnli)[0].text_a == "Who?"
    header = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
              "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"]
    row = ["0", "1", "1n", "gov", "(", "(", "(", "(", "A cat sat.", "A cat is sitting.", "entailment", "entailment"]
    mnli = write(tmp_path / "mnli.tsv", "\t".join(header) + "\n" + "\t".join(row) + "\n")
    e = read_glue(get_task("mnli"), mnli)[0]
    assert (e.text_a, e.text_b, e.label) == ("A cat sat.", "A cat is sitting.", "entailment")


def test_stsb_float_scores_and_bad_score(tmp_path):
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    p = write(tmp_path / "dev.tsv", head + "0\tc\tf\t2012\t1\tnone\tnone\tA plane.\tAn air plane.\t5.000\n")
    assert read_glue(get_task("stsb"), p)[0].label == 5.0
    bad = write(tmp_path / "bad.tsv", head + "0\tc\tf\t2012\t1\tnone\tnone\tA plane.\tAn air plane.\tfive\n")
    with pytest.raises(DataError, match=r"bad\.tsv:2: score 'five'"):
        read_glue(get_task("stsb"), bad)


def test_wrong_header_says_which_columns(tmp_path):
    p = write(tmp_path / "test.tsv", "index\tsentence\n0\tno labels here\n")
    with pytest.raises(DataError, match=r"test\.tsv:1: .*lacks the column"):
        read_glue(get_task("sst2"), p)


# --- CoNLL / CoNLL-U -------------------------------------------------------------------------
def test_conll_bio(tmp_path):
    p = write(tmp_path / "train.conll", "-DOCSTART-\tO\n\n@ann\tO\nParis\tB-location\nHilton\tI-location\n\nhi\tO\n")
    ex = read_conll(p)
    assert [e.words for e in ex] == [["@ann", "Paris", "Hilton"], ["hi"]]
    assert ex[0].tags == ["O", "B-location", "I-location"]


@pytest.mark.parametrize("line,needle", [("Paris", "expected `word<TAB>tag`"), ("Paris\tX-location", "not BIO")])
def test_conll_malformed_line(tmp_path, line, needle):
    p = write(tmp_path / "bad.conll", f"ok\tO\n\nfine\tO\n{line}\n")
    with pytest.raises(DataError, match=rf"bad\.conll:4: .*{needle}"):
        read_conll(p)


CONLLU = """# sent_id = 1
# text = Don't go.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVB\t_\t_\t_\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_
"""


def test_conllu_skips_multiword_and_empty_nodes(tmp_path):
    ex = read_conllu(write(tmp_path / "dev.conllu", CONLLU), UPOS_TAGS)
    assert ex[0].words == ["Do", "n't", "go", "."]
    assert ex[0].tags == ["AUX", "PART", "VERB", "PUNCT"]
    assert ex[1].words == ["Hi"]


def test_conllu_malformed(tmp_path):
    bad = write(tmp_path / "bad.conllu", CONLLU.replace("4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_", "4\t.\t.\tPUNCT"))
    with pytest.raises(DataError, match=r"bad\.conllu:8: 4 tab-separated fields"):
        read_conllu(bad)
    unknown = write(tmp_path / "tag.conllu", "1\tHi\thi\tWORD\tUH\t_\t0\troot\t_\t_\n")
    with pytest.raises(DataError, match=r"tag\.conllu:1: UPOS 'WORD'"):
        read_conllu(unknown, UPOS_TAGS)


# --- SQuAD ---------------------------------------------------------------------------------
def squad_json(articles):
    return {"version": "1.1", "data": [
        {"title": t, "paragraphs": [{"context": c, "qas": [
            {"id": f"{t}-{i}", "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}
            for i, (q, a) in enumerate(qas)]}]} for t, c, qas in articles]}


def test_squad_reads_answers(tmp_path):
    p = tmp_path / "dev.json"
    p.write_text(json.dumps(squad_json([("A", "The cat sat on the mat.", [("Where?", "the mat")])])))
    ex = read_squad(p)
    assert (ex[0].qid, ex[0].answers, ex[0].title) == ("A-0", [("the mat", 15)], "A")


def test_squad_malformed(tmp_path):
    p = write(tmp_path / "broken.json", '{"data": [\n{"title": "x",\n')
    with pytest.raises(DataError, match=r"broken\.json:3: not valid JSON"):
        read_squad(p)
    data = squad_json([("A", "Some text.", [("Q?", "text")])])
    del data["data"][0]["paragraphs"][0]["context"]
    p2 = tmp_path / "nocontext.json"
    p2.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"nocontext\.json: data\[0\]\.paragraphs\[0\]: a paragraph needs"):
        read_squad(p2)


# --- loading a task ----------------------------------------------------------------------------
def test_load_task_data_folder_overrides_and_demo_split(tmp_path):
    write(tmp_path / "train.tsv", "sentence\tlabel\na\t1\nb\t0\n")
    write(tmp_path / "dev.tsv", "sentence\tlabel\nc\t1\n")
    data = load_task_data(get_task("sst2"), tmp_path)
    assert len(data.train) == 2 and len(data.dev) == 1
    data = load_task_data(get_task("sst2"), tmp_path, train_file="dev.tsv")
    assert data.train[0].text_a == "c"
    (tmp_path / "train.tsv").unlink()
    with pytest.raises(DataError, match="--split-dev"):
        load_task_data(get_task("sst2"), tmp_path)


def test_demo_split_keeps_articles_together(tmp_path):
    articles = [(f"T{i}", f"Context {i} has an answer.", [("Q1?", "answer"), ("Q2?", "Context")]) for i in range(10)]
    p = tmp_path / "dev-v1.1.json"
    p.write_text(json.dumps(squad_json(articles)))
    data = load_task_data(get_task("squad"), p, split_dev=0.8)
    train_titles = {e.title for e in data.train}
    dev_titles = {e.title for e in data.dev}
    assert not train_titles & dev_titles
    assert len(train_titles) == 8 and len(dev_titles) == 2
    with pytest.raises(InputError):
        split_examples(data.dev, 1.5, 0)


def test_hf_source_without_datasets_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails as if not installed
    with pytest.raises(DataError, match="pip install datasets"):
        load_task_data(get_task("sst2"), "hf:")


# --- encoding --------------------------------------------------------------------------------
def test_tagging_labels_first_piece_only(tokenizer):
    ex = TaggingExample(["the", "cats", "walked"], ["DET", "NOUN", "VERB"])
    label_to_id = {"DET": 0, "NOUN": 1, "VERB": 2}
    (f,) = encode_tagging([ex], tokenizer, 32, label_to_id)
    tokens = tokenizer.convert_ids_to_tokens(f.input_ids)
    assert tokens == ["[CLS]", "the", "cat", "##s", "walked", "[SEP]"]
    assert f.token_labels == [IGNORE, 0, 1, IGNORE, 2, IGNORE]
    assert f.word_starts == [1, 2, 4]
    batch = collate([f], tokenizer.pad_id, "tagging")
    assert batch["labels"].tolist() == [f.token_labels]


def test_long_sentences_are_chunked_so_every_word_is_tagged(tokenizer):
    words = ["cats"] * 7  # 14 pieces; 6 fit beside [CLS]/[SEP] in 8 tokens
    ex = TaggingExample(words, ["NOUN"] * 7)
    feats = encode_tagging([ex], tokenizer, 8, {"NOUN": 0, "X": 1})
    assert [len(f.word_starts) for f in feats] == [3, 3, 1]
    assert [f.word_offset for f in feats] == [0, 3, 6]
    logits = [torch.tensor([[0.0, 1.0]] * len(f.input_ids)) for f in feats]
    assert decode_tagging([ex], feats, logits, ["NOUN", "X"]) == [["X"] * 7]


def test_sequence_pairs_truncate_and_carry_labels(tokenizer):
    ex = [SequenceExample("the cat sat on the mat", "the dog ran", "1")]
    (f,) = encode_sequences(ex, tokenizer, 8, {"0": 0, "1": 1})
    assert len(f.input_ids) == 8 and f.truncated and f.label == 1
    assert f.token_type_ids[-1] == 1
    (r,) = encode_sequences([SequenceExample("a", "b", 3.5)], tokenizer, 16, None)
    assert collate([r], 0, "regression")["labels"].dtype == torch.float


def test_qa_windows_positions_and_offsets(tokenizer):
    context = "The cat sat on the mat. The dog ran to the park. The bird sang in the tree."
    answer = "the park"
    ex = QAExample("q1", "where did the dog run?", context, [(answer, context.index(answer))])
    feats = encode_qa([ex], tokenizer, max_length=24, doc_stride=3, max_query_length=64, with_answers=True)
    assert len(feats) > 2  # the context needs several windows
    for f in feats:
        assert len(f.input_ids) <= 24
        assert f.token_type_ids[0] == 0 and f.token_type_ids[-1] == 1
    holding = [f for f in feats if f.start_position > 0]
    assert holding, "some window must contain the answer"
    for f in holding:
        s, e = f.token_to_char[f.start_position][0], f.token_to_char[f.end_position][1]
        assert context[s:e] == answer
    assert all(f.start_position == 0 == f.end_position for f in feats if f not in holding)
    # logits that point at the gold tokens decode back to the exact characters of the context
    starts, ends = [], []
    for f in feats:
        s, e = torch.full((len(f.input_ids),), -5.0), torch.full((len(f.input_ids),), -5.0)
        if f.start_position:
            s[f.start_position], e[f.end_position] = 5.0, 5.0
        starts.append(s)
        ends.append(e)
    (ans,) = decode_qa([ex], feats, starts, ends)
    assert (ans.text, ans.start, ans.end) == (answer, context.index(answer), context.index(answer) + len(answer))
    assert 0 < ans.score <= 1


def test_qa_decode_respects_order_and_max_length(tokenizer):
    context = "the cat sat on the mat"
    ex = QAExample("q", "what sat?", context)
    (f,) = encode_qa([ex], tokenizer, 64, 32, 64, with_answers=False)
    first_ctx = f.token_type_ids.index(1)
    s = torch.full((len(f.input_ids),), -5.0)
    e = torch.full((len(f.input_ids),), -5.0)
    s[first_ctx + 3] = 9.0  # the best start lies after the best end: not a valid span
    e[first_ctx + 1] = 9.0
    s[first_ctx + 1] = 8.0
    (ans,) = decode_qa([ex], [f], [s], [e])
    assert ans.text == "cat"
    (none,) = decode_qa([ex], [f], [s], [e], max_answer_length=0)
    assert none.text == ""
