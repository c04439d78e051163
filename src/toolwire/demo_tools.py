"""Small, deterministic tools for demos and docs: `--tool toolwire.demo_tools:ALL`."""

from __future__ import annotations

from toolwire.tools.base import tool

_WEATHER = {"paris": (18, "light rain"), "oslo": (4, "clear"), "tokyo": (22, "cloudy")}
_WITH = {"light rain": "light rain", "clear": "clear skies", "cloudy": "clouds"}


@tool
def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city (demo data), in °C and °F, with a one-line summary."""
    # Written so that `toolwire demo`'s 135M model answers right: it restates numbers well but
    # converts units wrongly, so the result carries both units and a sentence to repeat.
    city = city.strip(" ,.;:!?")  # a small model may write "Paris," into the argument
    celsius, sky = _WEATHER.get(city.lower(), (15, "unknown"))
    fahrenheit = round(celsius * 9 / 5 + 32)
    summary = f"It is {celsius} °C ({fahrenheit} °F) in {city}"
    summary += f", with {_WITH[sky]}." if sky in _WITH else "."
    return {
        "city": city,
        "temperature_c": celsius,
        "temperature_f": fahrenheit,
        "sky": sky,
        "summary": summary,
    }


@tool
def convert_temperature(celsius: float) -> str:
    """Celsius to Fahrenheit."""
    return f"{celsius:g} °C is {celsius * 9 / 5 + 32:g} °F"


ALL = [get_weather, convert_temperature]
