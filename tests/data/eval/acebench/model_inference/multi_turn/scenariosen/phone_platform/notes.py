"""A tiny notes app (test fixture). It imports its base class by package path, as ACEBench's apps do."""

from model_inference.multi_turn.scenariosen.phone_platform.base_api import BaseApi


class NotesApi(BaseApi):
    def __init__(self):
        super().__init__()
        self.notes = {1: {"title": "Shopping", "text": "milk"}}

    def _load_scenario(self, scenario: dict, long_context=False) -> None:
        self.wifi = scenario.get("wifi", False)
        self.logged_in = scenario.get("logged_in", True)

    def add_note(self, title: str, text: str) -> dict:
        if not self.wifi:
            return {"status": False, "message": "Wi-Fi is off, cannot sync the note"}
        self.notes[max(self.notes, default=0) + 1] = {"title": title, "text": text}
        return {"status": True, "message": f"Note '{title}' added"}

    def find_note(self, keyword: str) -> list:
        return [{"note_id": k, **v} for k, v in self.notes.items() if keyword in v["title"] + v["text"]]

    def append_to_note(self, note_id: int, text: str) -> dict:
        if note_id not in self.notes:
            raise KeyError(f"no note {note_id}")
        self.notes[note_id]["text"] += f", {text}"
        return {"status": True, "message": "Note updated"}
