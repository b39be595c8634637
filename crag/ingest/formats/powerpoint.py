"""PowerPoint (.pptx) → Markdown with python-pptx: one "## " section per slide.

A slide's title is its header (or "Slide N" when it has none); its text frames and tables follow in the
order the slide lists its shapes, and its speaker notes come last, inside the same section, so a chunk
holds what the slide says together with what the presenter says about it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator

from pptx import Presentation
from pptx.enum.shapes import PP_PLACEHOLDER
from pptx.shapes.autoshape import Shape
from pptx.shapes.base import BaseShape
from pptx.shapes.graphfrm import GraphicFrame
from pptx.shapes.group import GroupShape
from pptx.slide import Slide
from pptx.text.text import TextFrame

from crag.ingest.formats.common import (
    Converted,
    FormatError,
    assemble,
    check_office_zip,
    heading,
    inline,
    property_title,
    table,
)
from crag.ingest.formats.common import paragraph as text_paragraph

# Placeholders whose paragraphs are bullet points by default.
_BULLETED = {PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT}
_TITLES = {PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE}


def convert(data: bytes) -> Converted:
    check_office_zip(data, "pptx")
    presentation = Presentation(io.BytesIO(data))
    sections: list[str] = []
    first_title = ""
    for number, slide in enumerate(presentation.slides, start=1):
        slide_title = _slide_title(slide)
        first_title = first_title or slide_title
        body = _slide_body(slide)
        if slide_title or body:
            sections.append(heading(2, slide_title or f"Slide {number}"))
            sections.extend(body)
    if not sections:
        raise FormatError("no text found in the presentation")
    title = property_title(presentation.core_properties.title) or first_title
    return Converted(title=title, text=assemble(title, sections))


def _slide_title(slide: Slide) -> str:
    shape = slide.shapes.title
    return inline(shape.text_frame.text) if shape is not None and shape.has_text_frame else ""


def _slide_body(slide: Slide) -> list[str]:
    blocks: list[str] = []
    for shape in _shapes(slide.shapes):
        if _is_title(shape):
            continue
        if isinstance(shape, GraphicFrame) and shape.has_table:
            rendered = table([c.text for c in row.cells] for row in shape.table.rows)
            if rendered:
                blocks.append(rendered)
        elif isinstance(shape, Shape) and shape.has_text_frame:  # placeholders and text boxes are Shapes
            text = _text_frame(shape.text_frame, _is_bulleted(shape))
            if text:
                blocks.append(text)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = text_paragraph(frame.text) if frame is not None else ""
        if notes:
            blocks.append("Speaker notes:\n" + notes)
    return blocks


def _shapes(shapes: Iterable[BaseShape]) -> Iterator[BaseShape]:
    """Every shape, with the members of groups in place of the group."""
    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _shapes(shape.shapes)
        else:
            yield shape


def _is_title(shape: BaseShape) -> bool:
    return shape.is_placeholder and shape.placeholder_format.type in _TITLES


def _is_bulleted(shape: BaseShape) -> bool:
    return shape.is_placeholder and shape.placeholder_format.type in _BULLETED


def _text_frame(frame: TextFrame, bulleted: bool) -> str:
    lines: list[str] = []
    for para in frame.paragraphs:
        text = inline(para.text)
        if not text:
            continue
        lines.append("  " * para.level + "- " + text if bulleted else text_paragraph(text))
    return "\n".join(lines)
