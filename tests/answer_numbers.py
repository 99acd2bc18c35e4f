"""Where each number of a page's Answer box comes from: the box and the rest of the page, compared as text."""

import html as _html
import re

SPEEDUP_CI = re.compile(r"\d+\.\d{1,3}× \(95% CI \d+\.\d{1,3}–\d+\.\d{1,3}\)")  # 1 to 3 decimals: numbers.decimals
RATIO = re.compile(r"(?<![\d.–])(\d+\.\d{1,3})×")
RANGE = re.compile(r"(?<![\d.])(\d+\.\d{1,3})–(\d+\.\d{1,3})×")
COST = re.compile(r"one-time ([^,;]+?), paid back after ([\d,]+)(?:–([\d,]+))? call")
SECONDS = re.compile(r"\d+(?:\.\d)? m?s")


def _text(fragment: str) -> str:
    return _html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def split_answer(page: str) -> tuple[str, str]:
    """(the Answer box's text, the text of the page outside it)."""
    start = page.index('<div class="answer"')
    end = page.index("</div>", start)
    return _text(page[start:end]), _text(page[:start] + page[end:])


def answer_numbers_missing(page: str) -> tuple[list[str], int]:
    """(numbers of the box that the rest of the page does not print, how many were checked)."""
    box, rest = split_answer(page)
    rest = re.sub(r"\s+", " ", rest)
    box = re.sub(r"\s+", " ", box)
    wanted = set(SPEEDUP_CI.findall(box)) | {f"{r}×" for r in RATIO.findall(box)}
    wanted |= {f"{r}×" for pair in RANGE.findall(box) for r in pair}
    for cost, low, high in COST.findall(box):
        wanted |= set(SECONDS.findall(cost)) | {f"paid back after {n}" for n in (low, high) if n}
    return sorted(w for w in wanted if w not in rest), len(wanted)
