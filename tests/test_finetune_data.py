"""bertlab.finetune.data readers on tiny files written here: every format reads, and malformed
records name their file and line."""

import json
import sys

import pytest

from bertlab.errors import DataError, InputError
from bertlab.finetune.data import (
    load_task_data,
    read_conll,
    read_conllu,
    read_glue,
    read_squad,
    split_examples,
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
    p = write(
        tmp_path / "train.tsv",
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe ran.\tHe was running.\n",
        bom=True,
    )
    ex = read_glue(get_task("mrpc"), p)
    assert (ex[0].text_a, ex[0].text_b, ex[0].label) == ("He ran.", "He was running.", "1")


def test_pair_tasks_read_by_header(tmp_path):
    rte = write(tmp_path / "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA cat.\tAn animal.\tentailment\n")
    assert read_glue(get_task("rte"), rte)[0].label == "entailment"
    qnli = write(tmp_path / "qnli.tsv", "index\tquestion\tsentence\tlabel\n0\tWho?\tAnn did.\tnot_entailment\n")
    assert read_glue(get_task("qnli"), qnli)[0].text_a == "Who?"
    header = [
        "index",
        "promptID",
        "pairID",
        "genre",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "label1",
        "gold_label",
    ]
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
    return {
        "version": "1.1",
        "data": [
            {
                "title": t,
                "paragraphs": [
                    {
                        "context": c,
                        "qas": [
                            {"id": f"{t}-{i}", "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}
                            for i, (q, a) in enumerate(qas)
                        ],
                    }
                ],
            }
            for t, c, qas in articles
        ],
    }


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
