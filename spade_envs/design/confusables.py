"""Look-alike letters read as the Latin letters they look like, so a hint cannot hide a value in another script.

A hint that writes the needed password ``swordfish`` with Cyrillic ``ѕ``, ``о`` and ``і`` reads as ``swordfish`` to
the agent but is another string to a check that compares characters. :func:`fold` maps such letters to the Latin
letter they are read as, in the spirit of Unicode TR39's confusable *skeletons*, for the leak checks' token reading
(:func:`spade_envs.design.hint_reading.tokens`). The table is ours, written from the look-alike pairs of TR39's
``confusables.txt`` whose target is one ASCII letter (no package with that data is installed, and none is
downloaded), limited to letters and to these scripts:

- **Cyrillic** (``а е о р с у х ѕ і ј һ ԁ ԛ ԝ``, the capitals ``А В Е К М Н О Р С Т Х`` ...), **Greek** (``α ι ν ο
  ρ σ υ``, ``Α Β Ε Ζ Η Ι Κ Μ Ν Ο Ρ Τ Υ Χ`` ...), **Armenian** (``օ ո ս հ զ ց``, ``Օ Ս Տ`` ...), **Cherokee** capitals
  and their small forms, **Lisu**, **Coptic**, and Latin letters outside ASCII that TR39 reads as ASCII ones (``ı``,
  ``ɑ``, ``ɡ``, small capitals ``ᴄ ᴏ ᴜ ᴠ ᴡ ᴢ``);
- beyond TR39 (whose skeletons keep them apart): the other Latin small capitals (``ᴀ ʙ ᴅ ... ᴛ``), Latin letters
  with a stroke (``ø ł đ ħ ŧ ƀ ɨ ƶ ǥ ɉ``) and with any accent (``ó í š``: the combining marks after a Latin letter
  are dropped), and format characters inside a word (zero-width space, soft hyphen, direction marks, Hangul
  fillers: dropped);
- fullwidth and mathematical letters (``ｓ``, ``𝐬``, ``𝚨``) are NFKC's, applied in between.

Differences from TR39, on purpose: ASCII itself is never re-read (``rn`` stays ``rn``, ``l``, ``I``, ``1``, ``0``
and ``O`` stay apart: ASCII is what an env reads); letters are mapped only to letters (Cyrillic ``з`` and ``б``,
look-alikes of the digits 3 and 6, stay letters); and an I-shaped letter (Cyrillic ``І Ӏ ӏ``, Greek ``Ι``, ...) reads
as ``I``/``i``, or as ``l`` with ``ell=True`` (the hint reading looks a value up in both). Not covered: look-alikes
from other scripts (Canadian syllabics, Tifinagh, Old Italic, ...), digit look-alikes, and lower-case Cyrillic
letters shaped like small capitals (``к м н т в``: common Russian words would fold onto English ones).
"""

from __future__ import annotations

import unicodedata

__all__ = ["LOOKALIKES", "fold"]

_CYRILLIC = {
    0x0405: "S", 0x0408: "J", 0x0410: "A", 0x0412: "B", 0x0415: "E", 0x041A: "K", 0x041C: "M", 0x041D: "H",
    0x041E: "O", 0x0420: "P", 0x0421: "C", 0x0422: "T", 0x0423: "Y", 0x0425: "X", 0x042C: "b", 0x0430: "a",
    0x0433: "r", 0x0435: "e", 0x043E: "o", 0x0440: "p", 0x0441: "c", 0x0443: "y", 0x0445: "x", 0x0455: "s",
    0x0456: "i", 0x0458: "j", 0x0461: "w", 0x0474: "V", 0x0475: "v", 0x04AE: "Y", 0x04AF: "y", 0x04BB: "h",
    0x04BD: "e", 0x0501: "d", 0x050C: "G", 0x051B: "q", 0x051C: "W", 0x051D: "w", 0xA647: "i",
}  # fmt: skip
_GREEK = {
    0x037F: "J", 0x0391: "A", 0x0392: "B", 0x0395: "E", 0x0396: "Z", 0x0397: "H", 0x039A: "K", 0x039C: "M",
    0x039D: "N", 0x039F: "O", 0x03A1: "P", 0x03A4: "T", 0x03A5: "Y", 0x03A7: "X", 0x03B1: "a", 0x03B3: "y",
    0x03B9: "i", 0x03BD: "v", 0x03BF: "o", 0x03C1: "p", 0x03C3: "o", 0x03C5: "u", 0x03D2: "Y", 0x03DC: "F",
    0x03F1: "p", 0x03F2: "c", 0x03F3: "j", 0x03F9: "C", 0x03FA: "M", 0x1D26: "r",
}  # fmt: skip
_ARMENIAN = {
    0x054D: "U", 0x054F: "S", 0x0555: "O", 0x0561: "w", 0x0563: "q", 0x0566: "q", 0x0570: "h", 0x0578: "n",
    0x057C: "n", 0x057D: "u", 0x0581: "g", 0x0584: "f", 0x0585: "o",
}  # fmt: skip
_CHEROKEE = {  # capitals; their small forms (U+AB70..) are added below with the letter in lower case
    0x13A0: "D", 0x13A1: "R", 0x13A2: "T", 0x13A5: "i", 0x13A9: "Y", 0x13AA: "A", 0x13AB: "J", 0x13AC: "E",
    0x13B3: "W", 0x13B7: "M", 0x13BB: "H", 0x13BD: "Y", 0x13C0: "G", 0x13C2: "h", 0x13C3: "Z", 0x13CF: "b",
    0x13D2: "R", 0x13D4: "W", 0x13D5: "S", 0x13D9: "V", 0x13DA: "S", 0x13DE: "L", 0x13DF: "C", 0x13E2: "P",
    0x13E6: "K", 0x13E7: "d", 0x13F3: "G", 0x13F4: "B",
}  # fmt: skip
_LISU = {
    0xA4D0: "B", 0xA4D1: "P", 0xA4D2: "d", 0xA4D3: "D", 0xA4D4: "T", 0xA4D6: "G", 0xA4D7: "K", 0xA4D9: "J",
    0xA4DA: "C", 0xA4DC: "Z", 0xA4DD: "F", 0xA4DF: "M", 0xA4E0: "N", 0xA4E1: "L", 0xA4E2: "S", 0xA4E3: "R",
    0xA4E6: "V", 0xA4E7: "H", 0xA4EA: "W", 0xA4EB: "X", 0xA4EC: "Y", 0xA4EE: "A", 0xA4F0: "E", 0xA4F3: "O",
    0xA4F4: "U",
}  # fmt: skip
_COPTIC = {
    0x2C85: "r", 0x2C8E: "H", 0x2C94: "K", 0x2C98: "M", 0x2C9A: "N", 0x2C9E: "O", 0x2C9F: "o", 0x2CA2: "P",
    0x2CA3: "p", 0x2CA4: "C", 0x2CA5: "c", 0x2CA6: "T", 0x2CA8: "Y", 0x2CAC: "X", 0x2CD0: "L",
}  # fmt: skip
_LATIN = {  # TR39's, then ours: the other small capitals and the letters with a stroke
    0x0131: "i", 0x0184: "b", 0x018D: "g", 0x01A6: "R", 0x01BD: "s", 0x0251: "a", 0x0261: "g", 0x0263: "y",
    0x0269: "i", 0x026A: "i", 0x026F: "w", 0x028B: "u", 0x028F: "y", 0x1D04: "c", 0x1D0F: "o", 0x1D11: "o",
    0x1D1C: "u", 0x1D20: "v", 0x1D21: "w", 0x1D22: "z", 0x1D83: "g", 0x1D8C: "y", 0x1E9D: "f", 0x1EFF: "y",
    0xA731: "s", 0xA798: "F", 0xA799: "f", 0xA79F: "u", 0xA7B2: "J", 0xA7B3: "X", 0xA7B4: "B", 0xAB32: "e",
    0xAB35: "f", 0xAB3D: "o", 0xAB47: "r", 0xAB48: "r", 0xAB4E: "u", 0xAB52: "u", 0xAB5A: "y",
    0x1D00: "a", 0x0299: "b", 0x1D05: "d", 0x1D07: "e", 0x0262: "g", 0x029C: "h", 0x1D0A: "j", 0x1D0B: "k",
    0x029F: "l", 0x1D0D: "m", 0x0274: "n", 0x1D18: "p", 0x0280: "r", 0x1D1B: "t",
    0x00D8: "O", 0x00F8: "o", 0x0110: "D", 0x0111: "d", 0x0126: "H", 0x0127: "h", 0x0141: "L", 0x0142: "l",
    0x0166: "T", 0x0167: "t", 0x0180: "b", 0x01B5: "Z", 0x01B6: "z", 0x01E4: "G", 0x01E5: "g", 0x0237: "j",
    0x0249: "j", 0x0268: "i",
}  # fmt: skip
#: Letters shaped like ``I`` (or ``l``): read as I/i, or as l with ``ell=True``.
_I_SHAPED = {0x0406: "I", 0x04C0: "I", 0x04CF: "i", 0x0399: "I", 0x0196: "I", 0x01C0: "I", 0x2C92: "I", 0xA4F2: "I"}

#: Every look-alike letter and the Latin letter it is read as (I-shaped ones as I/i).
LOOKALIKES: dict[str, str] = {
    chr(cp): latin
    for table in (_CYRILLIC, _GREEK, _ARMENIAN, _CHEROKEE, _LISU, _COPTIC, _LATIN, _I_SHAPED)
    for cp, latin in table.items()
}
LOOKALIKES |= {chr(cp).lower(): latin.lower() for cp, latin in _CHEROKEE.items()}
LOOKALIKES["\uab81"] = "r"  # a Cherokee small letter whose capital looks like no Latin one
_ELL = {chr(cp): "l" for cp in _I_SHAPED}
#: Default-ignorable code points that are no format character: combining grapheme joiner, variation selectors, and
#: the Hangul fillers (letters that render as nothing: ``s\u3164wordfish`` reads as swordfish).
_IGNORABLE_MARKS = frozenset([0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])


def _map(text: str, table: dict[str, str]) -> str:
    return "".join(table.get(ch, ch) for ch in text)


def fold(text: str, *, ell: bool = False) -> str:
    """``text`` with every look-alike letter read as its Latin letter (module docstring); ASCII text unchanged.

    The table is applied before and after NFKC (``ϲ`` would become a sigma, ``𝚨`` becomes ``Α`` first); then, in
    canonical decomposition, combining marks after a Latin letter and format characters are dropped and the rest
    is recomposed, so letters of other scripts keep their accents (``й`` stays ``й``). ``ell``: I-shaped letters
    read as ``l`` instead of ``I``.
    """
    if text.isascii():
        return text
    table = LOOKALIKES | _ELL if ell else LOOKALIKES
    text = unicodedata.normalize("NFKC", _map(text, table))
    out: list[str] = []
    for ch in unicodedata.normalize("NFD", text):
        ch = table.get(ch, ch)
        category = unicodedata.category(ch)
        if category == "Cf" or ord(ch) in _IGNORABLE_MARKS:
            continue
        if category == "Mn" and out and out[-1].isascii() and out[-1].isalpha():
            continue  # an accent on a Latin letter: "swórdfísh" is read as swordfish
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))
