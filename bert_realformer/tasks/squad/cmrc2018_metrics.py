"""CMRC 2018 evaluation, computed as the official CMRC 2018 script computes it.

* EM: an answer matches when it equals the prediction after lower-casing, stripping and
  removing the script's punctuation characters.
* F1: both are cut into mixed segments (after lower-casing and removing that punctuation):
  each CJK character (U+4E00..U+9FA5) and each punctuation character on its own, the runs of
  other characters word-tokenized; precision and recall come from the longest common
  contiguous run of segments. The official script word-tokenizes with NLTK (which needs
  downloaded data); `word_tokenize` here splits a run on whitespace and cuts punctuation off
  words, as NLTK's Treebank tokenizer does for the text these sets hold.
* A question scores its best gold answer; EM and F1 are means x 100 over every question (an
  unanswered one counts 0 and is counted in `SKIP`); `AVERAGE` is (EM + F1) / 2.
"""

import re

# The official script's punctuation (its two-character '……' never matches one character).
PUNCTUATION = frozenset("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")
_CJK = re.compile("[\u4e00-\u9fa5]")
_WORD = re.compile(r"\w+(?:[.'’-]\w+)*|[^\w\s]")


def word_tokenize(text):
    """Words and punctuation marks of a run of non-CJK text."""
    return _WORD.findall(text)


def mixed_segmentation(text, remove_punctuation=False):
    """Segments of `text` (lower-cased, stripped): CJK and punctuation characters one by one,
    other runs word-tokenized."""
    segments, run = [], ""
    for char in text.lower().strip():
        if remove_punctuation and char in PUNCTUATION:
            continue
        if _CJK.match(char) or char in PUNCTUATION:
            segments.extend(word_tokenize(run))
            run = ""
            segments.append(char)
        else:
            run += char
    segments.extend(word_tokenize(run))
    return segments


def _without_punctuation(text):
    return "".join(c for c in text.lower().strip() if c not in PUNCTUATION)


def longest_common_run(a, b):
    """Length of the longest common contiguous run of two lists."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def f1_score(answers, prediction):
    scores = []
    for answer in answers:
        gold, predicted = (mixed_segmentation(t, remove_punctuation=True) for t in (answer, prediction))
        common = longest_common_run(gold, predicted)
        if common == 0:
            scores.append(0.0)
            continue
        precision, recall = common / len(predicted), common / len(gold)
        scores.append(2 * precision * recall / (precision + recall))
    return max(scores)


def exact_score(answers, prediction):
    return int(any(_without_punctuation(a) == _without_punctuation(prediction) for a in answers))


def evaluate(dataset, predictions):
    """{AVERAGE, F1, EM, TOTAL, SKIP} of predictions {question id: text} on SQuAD-format data
    (`json.load(file)["data"]`). The scores are floats here (the script prints them with three
    decimals)."""
    f1 = em = total = skipped = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                qid = qa["id"].strip()
                if qid not in predictions:
                    skipped += 1
                    continue
                answers = [a["text"] for a in qa["answers"]]
                f1 += f1_score(answers, str(predictions[qid]))
                em += exact_score(answers, str(predictions[qid]))
    f1, em = 100.0 * f1 / total, 100.0 * em / total
    return {"AVERAGE": (em + f1) * 0.5, "F1": f1, "EM": em, "TOTAL": total, "SKIP": skipped}
