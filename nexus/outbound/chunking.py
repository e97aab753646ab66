"""Splitting a reply into platform-sized chunks at the most natural break, fences kept closed."""

from __future__ import annotations

import bisect
import re

# Characters per message; a platform missing here (email, webhook) takes any length.
PLATFORM_LIMITS: dict[str, int] = {
    "telegram": 4096,
    "slack": 4000,
    "discord": 2000,
    "whatsapp": 4096,
    "sms": 1600,
    # iMessage takes far longer texts, but a phone shows a wall of text; bubbles read better.
    "imessage": 2000,
}
# Below this a chunk cannot hold a reopened fence, its closing line and some code.
MIN_LIMIT = 32

# A line opening or closing a fenced code block. Blocks simply toggle on each such line, so
# the chunker and the renderer (which imports this) always agree on what is code.
FENCE_LINE = re.compile(r"^[ \t]*(`{3,}).*$", re.MULTILINE)

# Break points, best first. `gap` is the whitespace a break swallows: the chunk ends where
# the gap starts and the next one resumes where it ends.
_BREAKS = (
    re.compile(r"(?P<gap>\n(?:[ \t]*\n)+)"),  # paragraph: one or more blank lines
    re.compile(r"(?P<gap>\n)"),  # line
    re.compile(r"[.!?…][\"'\u201d\u2019)\]]*(?P<gap>[ \t]+)"),  # sentence end (and closing quote)
    re.compile(r"(?P<gap>[ \t]+)"),  # word
)
_BLANK_LINES = re.compile(r"(?:[ \t]*\n)*")
_SPACES = re.compile(r"[ \t]*")


def limit_for(platform: str) -> int | None:
    """The platform's message size in characters, or None when it takes any length."""
    return PLATFORM_LIMITS.get(platform)


def chunk(text: str, limit: int | None) -> list[str]:
    """Split `text` into chunks of at most `limit` characters (None: one chunk).

    Each chunk ends at the latest paragraph break that fits, else line break, else sentence
    end, else space, else mid-word. A fenced code block cut by a chunk boundary is closed at
    the end of the chunk and reopened (same opening line) at the start of the next.
    """
    if limit is not None and limit < MIN_LIMIT:
        raise ValueError(f"limit {limit} is below the minimum of {MIN_LIMIT}")
    return _Chunker(text, limit).chunks()


class _Chunker:
    def __init__(self, text: str, limit: int | None) -> None:
        self.text = text
        self.limit = limit
        self.content_end = len(text.rstrip())
        self.fences = list(FENCE_LINE.finditer(text))
        self.fence_starts = [fence.start() for fence in self.fences]

    def chunks(self) -> list[str]:
        pieces: list[str] = []
        start = self._resume_at(0)
        while start < self.content_end:
            rest = self._render(start, self.content_end)
            if self.limit is None or len(rest) <= self.limit:
                pieces.append(rest)
                break
            end, resume = self._best_break(start, self.limit)
            pieces.append(self._render(start, end))
            start = self._resume_at(resume)
        return pieces

    def _open_fence(self, index: int) -> re.Match[str] | None:
        """The opening line of the fenced block `index` lies in, if it lies in one."""
        before = bisect.bisect_left(self.fence_starts, index)
        return self.fences[before - 1] if before % 2 else None

    def _render(self, start: int, end: int) -> str:
        """text[start:end] as a chunk: trailing whitespace dropped, cut fences closed/reopened."""
        reopened, closed = self._open_fence(start), self._open_fence(end)
        head = self._fence_line(reopened.group(0), 2) + "\n" if reopened else ""
        tail = "\n" + self._fence_line(closed.group(1), 4) if closed else ""
        return head + self.text[start:end].rstrip() + tail

    def _fence_line(self, line: str, share: int) -> str:
        # An absurdly long fence line would crowd out the code: a plain fence does the job.
        return line if self.limit is None or len(line) <= self.limit // share else "```"

    def _best_break(self, start: int, limit: int) -> tuple[int, int]:
        # A gap may begin right at the limit: the chunk then ends exactly there.
        window_end = min(len(self.text), start + limit + 1)
        for pattern in _BREAKS:
            for match in reversed(list(pattern.finditer(self.text, start, window_end))):
                end, resume = match.start("gap"), match.end("gap")
                if self._fits(start, end, limit) and not self._fakes_fence(resume):
                    return end, resume
        return self._hard_cut(start, limit)

    def _fits(self, start: int, end: int, limit: int) -> bool:
        if end <= start or end - start > limit or not self.text[start:end].strip():
            return False
        if self._fence_line_cut_at(end) or self._ends_on_opening(start, end):
            return False  # a fence line cut in two, or a fence opened with nothing in it
        return len(self._render(start, end)) <= limit

    def _ends_on_opening(self, start: int, end: int) -> bool:
        """True when the chunk would end with a fence opened and nothing in it yet."""
        opening = self._open_fence(end)
        return (
            opening is not None
            and opening.start() >= start
            and not self.text[opening.end() : end].strip()
        )

    def _hard_cut(self, start: int, limit: int) -> tuple[int, int]:
        end = min(self.content_end, start + limit)
        while True:
            while end > start + 1 and (
                len(self._render(start, end)) > limit or self._fakes_fence(end)
            ):
                end -= 1
            # Never through a fence line (unless it alone outgrows a chunk): back up to its
            # start, which may now need a closing line, so fit again.
            fence = self._fence_line_cut_at(end)
            if fence is None or fence.start() <= start:
                return end, end
            end = fence.start()

    def _fakes_fence(self, resume: int) -> bool:
        """True when a chunk resuming mid-line would start with backticks: a fence, to a reader."""
        if resume == 0 or self.text[resume - 1] == "\n":
            return False
        return self.text.startswith("```", _skip(_SPACES, self.text, resume))

    def _fence_line_cut_at(self, index: int) -> re.Match[str] | None:
        before = bisect.bisect_left(self.fence_starts, index)
        fence = self.fences[before - 1] if before else None
        return fence if fence is not None and index < fence.end() else None

    def _resume_at(self, index: int) -> int:
        """Where the next chunk starts: past blank lines, and past spaces mid-line."""
        index = _skip(_BLANK_LINES, self.text, index)
        if index > 0 and self.text[index - 1] != "\n":
            index = _skip(_SPACES, self.text, index)
        # A closing fence here would open the next chunk with an empty reopened block; the
        # closing line the last chunk got stands in for it.
        before = bisect.bisect_left(self.fence_starts, index)
        if before % 2 and before < len(self.fences) and self.fence_starts[before] == index:
            return self._resume_at(self.fences[before].end())
        return index


def _skip(pattern: re.Pattern[str], text: str, index: int) -> int:
    match = pattern.match(text, index)
    return match.end() if match else index
