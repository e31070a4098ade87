"""Do SOP and NSP compare on encyclopaedic text as on the books (sop_vs_nsp.py --corpus)? This writes
that text: WikiText raw files as one article per line, the document_per_line input of the data tools.

Read as document_per_line, wikitext's own layout makes every paragraph (and every heading) a
document; sentence-pair tasks then never cross a paragraph. Here each article (from one top-level
" = Title = " line to the next) becomes one line: its paragraphs joined, section headings dropped,
and the tokenizer's " @-@ ", " @,@ ", " @.@ " put back as "-", ",", ".".

Usage: python experiments/wikitext_articles.py OUTPUT FILE... (e.g. the wiki.valid.raw and wiki.test.raw
of ../shared/data/corpus/wikitext-2-raw, which give 122 articles, 2.4 MB)
"""

import re
import sys

TITLE = re.compile(r"= [^=].* =")
UNDONE = {" @-@ ": "-", " @,@ ": ",", " @.@ ": "."}


def articles(paths):
    """Yields each article's text, paragraphs joined by spaces; text before the first title is dropped."""
    paragraphs = None
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                if TITLE.fullmatch(line):
                    if paragraphs:
                        yield " ".join(paragraphs)
                    paragraphs = []
                elif paragraphs is not None and not line.startswith("= ="):
                    for token, char in UNDONE.items():
                        line = line.replace(token, char)
                    paragraphs.append(line)
    if paragraphs:
        yield " ".join(paragraphs)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[-1])
    count = 0
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        for article in articles(sys.argv[2:]):
            out.write(article + "\n")
            count += 1
    print(f"wrote {count} articles to {sys.argv[1]}")


if __name__ == "__main__":
    main()
