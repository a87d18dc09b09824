"""Smart-home scene: set several devices to the values a user asks for, and leave every other device alone.

Skill: state_modification. The user names devices by room and description, so the agent must discover their ids,
learn each device type's property names and ranges, reconnect offline devices before changing them (a dependent
mutation), and apply every change exactly. The state predicate also fails if any other setting was changed.
"""

from __future__ import annotations

import json
import random
from typing import Literal

from spade_envs.tooluse import Instruction, ToolError, ToolUseEnv, tool_call

# Settable properties per device type: (low, high) for whole numbers, a list for named values.
PROPS: dict[str, dict[str, tuple[int, int] | list[str]]] = {
    "light": {"brightness": (0, 100)},
    "blinds": {"position": (0, 100)},
    "thermostat": {"target_c": (16, 28), "mode": ["heat", "cool", "auto", "off"]},
    "lock": {"state": ["locked", "unlocked"]},
    "tv": {"power": ["on", "off"], "volume": (0, 100)},
}
# Room -> (device type, description) it holds. Living room and hallway are in every home. Locks are named by door.
ROOMS = {
    "Living room": [("light", "ceiling light"), ("light", "floor lamp"), ("blinds", "blinds"), ("tv", "TV")],
    "Hallway": [("light", "light"), ("lock", "front door lock"), ("thermostat", "thermostat")],
    "Bedroom": [("light", "ceiling light"), ("light", "bedside lamp"), ("blinds", "blinds")],
    "Kitchen": [("light", "counter lights"), ("lock", "back door lock"), ("blinds", "blinds")],
    "Office": [("light", "desk lamp"), ("blinds", "blinds"), ("thermostat", "thermostat")],
    "Dining room": [("light", "chandelier"), ("blinds", "blinds")],
    "Garage": [("light", "light"), ("lock", "side door lock")],
}
OPENERS = ["Can you adjust a few things at home?", "Quick changes before I get home.", "I need a few changes at home.",
           "Guests are coming over.", "Getting ready for the evening.", "Hi!"]  # fmt: skip
# Values a user asks for: (low, high, step) per numeric property.
TARGET_RANGE = {"brightness": (0, 100, 5), "position": (0, 100, 25), "target_c": (18, 25, 1), "volume": (5, 60, 5)}
PREFIX = {"light": "light", "blinds": "blinds", "thermostat": "thermo", "lock": "lock", "tv": "tv"}


def _initial(kind: str, rng: random.Random) -> dict:
    """A plausible starting setting for a device of this type."""
    if kind == "light":
        return {"brightness": rng.randrange(0, 101, 10)}
    if kind == "blinds":
        return {"position": rng.randrange(0, 101, 25)}
    if kind == "thermostat":
        return {"target_c": rng.randint(17, 24), "mode": rng.choice(["heat", "cool", "auto", "off"])}
    if kind == "lock":
        return {"state": rng.choice(["locked", "unlocked"])}
    return {"power": rng.choice(["on", "off"]), "volume": rng.randrange(0, 61, 5)}


def _phrase(name: str, prop: str, value: int | str) -> str:
    """How a user would ask for one change."""
    if prop == "brightness":
        return f"turn off the {name}" if value == 0 else f"set the {name} to {value}% brightness"
    if prop == "position":
        return {0: f"close the {name}", 100: f"open the {name} all the way"}.get(value, f"open the {name} to {value}%")
    if prop == "target_c":
        return f"set the {name} to {value} degrees"
    if prop == "mode":
        return f"set the {name} mode to {value}"
    if prop == "state":
        return f"{value[:-2]} the {name.removesuffix(' lock')}"  # "lock the front door"
    if prop == "power":
        return f"turn {value} the {name}"
    return f"set the {name} volume to {value}"


class SmartHomeSceneEnv(ToolUseEnv):
    max_turns = 16
    domain = "smart_home"

    def setup(self) -> Instruction:
        rng = self.rng
        extra = rng.sample([r for r in ROOMS if r not in ("Living room", "Hallway")], rng.randint(2, 3))
        self.rooms = ["Living room", "Hallway"] + extra
        numbers = iter(rng.sample(range(10, 100), 30))
        self.devices: dict[str, dict] = {}
        for room in self.rooms:
            for kind, label in ROOMS[room]:
                dev_id = f"{PREFIX[kind]}-{next(numbers)}"
                name = label if kind == "lock" else f"{room.lower()} {label}"
                self.devices[dev_id] = {"name": name, "room": room, "type": kind, "online": True}
                self.devices[dev_id]["settings"] = _initial(kind, rng)
        self.initial = {d: dict(dev["settings"]) for d, dev in self.devices.items()}
        # The scene: 3-5 devices, one change each, always different from the current value.
        self.targets: dict[tuple[str, str], int | str] = {}
        for dev_id in rng.sample(sorted(self.devices), rng.randint(3, 5)):
            kind = self.devices[dev_id]["type"]
            prop = rng.choice(sorted(PROPS[kind]))
            spec, now = PROPS[kind][prop], self.initial[dev_id][prop]
            if isinstance(spec, list):
                options = [v for v in spec if v != now]
            else:
                low, high, step = TARGET_RANGE[prop]
                options = [v for v in range(low, high + 1, step) if v != now]
            self.targets[(dev_id, prop)] = rng.choice(options)
        # One or two scene devices are offline, sometimes plus a bystander: reconnecting one is harmless.
        scene_ids = sorted({d for d, _ in self.targets})
        self.offline = rng.sample(scene_ids, rng.randint(1, 2))
        if rng.random() < 0.5:
            self.offline.append(rng.choice(sorted(set(self.devices) - set(scene_ids))))
        for dev_id in self.offline:
            self.devices[dev_id]["online"] = False
        asks = [_phrase(self.devices[d]["name"], p, v) for (d, p), v in self.targets.items()]
        text = (
            f"{rng.choice(OPENERS)} Please {', '.join(asks[:-1])}, and {asks[-1]}. "
            "Leave everything else exactly as it is."
        )
        return Instruction(text, state=self._scene_applied)

    def _scene_applied(self) -> bool:
        """Every requested value is set and every other setting still has its initial value."""
        for dev_id, dev in self.devices.items():
            for prop, value in dev["settings"].items():
                if value != self.targets.get((dev_id, prop), self.initial[dev_id][prop]):
                    return False
        return True

    def _device(self, device_id: str) -> dict:
        dev = self.devices.get(device_id.strip().lower())
        if dev is None:
            raise ToolError(f"no device {device_id!a}; use list_devices(room) to see device ids")
        return dev

    # -- tools --------------------------------------------------------------------------------------------------------
    def tool_list_rooms(self) -> str:
        """List the rooms of the home."""
        return json.dumps(self.rooms)

    def tool_list_devices(self, room: str) -> str:
        """List the devices in a room with their ids, types and connection status.

        Args:
            room: Room name, e.g. "Living room".
        """
        match = [r for r in self.rooms if r.lower() == " ".join(room.lower().replace("_", " ").split())]
        if not match:
            raise ToolError(f"no room {room!a}. Rooms: {', '.join(self.rooms)}")
        rows = [
            {
                "device_id": d,
                "name": dev["name"],
                "type": dev["type"],
                "status": "online" if dev["online"] else "offline",
            }
            for d, dev in self.devices.items()
            if dev["room"] == match[0]
        ]
        return "\n".join(json.dumps(r) for r in rows)

    def tool_get_device(self, device_id: str) -> str:
        """Show a device's current settings and which properties can be set, with their allowed values.

        Args:
            device_id: Device id from list_devices, e.g. "light-42".
        """
        dev = self._device(device_id)
        allowed = {
            p: (f"{s[0]}-{s[1]}" if isinstance(s, tuple) else "|".join(s)) for p, s in PROPS[dev["type"]].items()
        }
        status = "online" if dev["online"] else "offline (reconnect it before changing settings)"
        return json.dumps({"name": dev["name"], "status": status, "settings": dev["settings"], "allowed": allowed})

    def tool_set_device(self, device_id: str, property: str, value: str) -> str:
        """Change one setting of an online device.

        Args:
            device_id: Device id from list_devices.
            property: Setting name, e.g. "brightness", "position", "target_c", "mode", "state", "power", "volume".
            value: New value as text, e.g. "40" or "locked".
        """
        dev = self._device(device_id)
        spec = PROPS[dev["type"]].get(property.strip().lower())
        if spec is None:
            raise ToolError(f"a {dev['type']} has no property {property!a}; it has: {', '.join(PROPS[dev['type']])}")
        if not dev["online"]:
            raise ToolError(f"{device_id} is offline; call reconnect first")
        text = value.strip().lower().rstrip("%")
        if isinstance(spec, list):
            if text not in spec:
                raise ToolError(f"{property} must be one of {', '.join(spec)}, got {value!a}")
            new: int | str = text
        else:
            if not (text.isascii() and text.isdigit()) or not spec[0] <= int(text) <= spec[1]:
                raise ToolError(f"{property} must be a whole number from {spec[0]} to {spec[1]}, got {value!a}")
            new = int(text)
        prop = property.strip().lower()
        old, dev["settings"][prop] = dev["settings"][prop], new
        return f"{dev['name']}: {prop} {old} -> {new}"

    def tool_reconnect(self, device_id: str) -> str:
        """Wake an offline device so that its settings can be changed.

        Args:
            device_id: Device id from list_devices.
        """
        dev = self._device(device_id)
        if dev["online"]:
            return f"{dev['name']} is already online."
        dev["online"] = True
        return f"{dev['name']} is back online."

    def tool_get_energy_report(self, period: Literal["day", "week", "month"] = "day") -> str:
        """Show the home's electricity use over a recent period.

        Args:
            period: How far back to report.
        """
        days = {"day": 1, "week": 7, "month": 30}[period]
        return json.dumps({"period": period, "kwh": round(days * (6.5 + len(self.devices) / 4), 1)})

    def solution(self) -> list[str]:
        rooms = [r for r in self.rooms if any(self.devices[d]["room"] == r for d, _ in self.targets)]
        wake = [d for d in self.offline if any(d == t for t, _ in self.targets)]
        sets = [tool_call("set_device", device_id=d, property=p, value=str(v)) for (d, p), v in self.targets.items()]
        return [
            "\n".join(tool_call("list_devices", room=r) for r in rooms),
            "\n".join(tool_call("reconnect", device_id=d) for d in wake),
            "\n".join(sets),
            "<answer>done</answer>",
        ]
