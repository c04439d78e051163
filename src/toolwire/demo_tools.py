"""Small, deterministic tools for demos and docs: `--tool toolwire.demo_tools:ALL`."""

from __future__ import annotations

from toolwire.tools.base import tool

_WEATHER = {"paris": (18, "light rain"), "oslo": (4, "clear"), "tokyo": (22, "cloudy")}


@tool
def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city (demo data)."""
    temperature, sky = _WEATHER.get(city.strip().lower(), (15, "unknown"))
    return {"city": city, "temperature_c": temperature, "sky": sky}


@tool
def convert_temperature(celsius: float) -> str:
    """Celsius to Fahrenheit."""
    return f"{celsius:g} °C is {celsius * 9 / 5 + 32:g} °F"


ALL = [get_weather, convert_temperature]
