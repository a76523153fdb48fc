"""English sentences: the VADER paper's ground-truth texts."""

import tarfile

from bert_realformer.realdata.sources import vader_sdist


def english_sentences():
    """About 23,700 English sentences: the text column of the four `*_GroundTruth.txt` files."""
    lines = []
    with tarfile.open(vader_sdist()) as sdist:
        inner = sdist.extractfile("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz")
        with tarfile.open(fileobj=inner) as data:
            for member in sorted(data.getnames()):
                if member.endswith("_GroundTruth.txt"):
                    text = data.extractfile(member).read().decode("utf-8", "replace")
                    for line in text.split("\n"):
                        fields = line.rstrip("\r").split("\t")
                        if len(fields) >= 3 and fields[2].strip():
                            lines.append(fields[2])
    return lines
