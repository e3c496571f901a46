//! `weather`: daily forecasts for a city from [Open-Meteo](https://open-meteo.com)
//! (free, no API key), over `wasi:http`.
//!
//! One call makes two requests: the geocoding API turns the city into
//! coordinates, the forecast API gives the days. The tool reaches only the
//! hosts the operator grants:
//!
//! ```toml
//! [tools.get_weather]
//! network = ["geocoding-api.open-meteo.com", "api.open-meteo.com"]
//! ```
//!
//! The base URLs come from the environment variables `GEOCODING_API_URL`
//! and `FORECAST_API_URL` (defaults [`DEFAULT_GEOCODING_API_URL`],
//! [`DEFAULT_FORECAST_API_URL`]), so an operator can point the tool at a
//! self-hosted Open-Meteo (`[tools.get_weather.env]`), and the tests at a
//! local fixture.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolcage_guest::http;
use toolcage_guest::{JsonSchema, ObjectOutput, export, tool};

/// Open-Meteo's forecast API.
pub const DEFAULT_FORECAST_API_URL: &str = "https://api.open-meteo.com";
/// Open-Meteo's geocoding API.
pub const DEFAULT_GEOCODING_API_URL: &str = "https://geocoding-api.open-meteo.com";

/// The longest range one call covers: Open-Meteo forecasts reach 16 days
/// ahead, and a longer table is more than a model can use at once.
pub const MAX_DAYS: i64 = 16;

/// Each request gives up after this long without progress, well inside the
/// default 30 s call deadline, so a slow service becomes an error the model
/// can read instead of a killed call.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Open-Meteo answers a 16-day forecast in about 2 KiB; anything near this
/// is not the API we expect.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Arguments of `get_weather`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeatherArgs {
    /// The city or town, such as `Berlin` or `San Francisco` (English or local
    /// name).
    #[schemars(length(min = 1))]
    pub city: String,
    /// ISO 3166-1 alpha-2 country code, such as `DE` or `US`, to choose among
    /// places of the same name. Without it, the most populous match wins.
    #[serde(default)]
    #[schemars(pattern(r"^[A-Za-z]{2}$"))]
    pub country: Option<String>,
    /// The first day, `YYYY-MM-DD`, in the place's local time.
    #[schemars(pattern(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"))]
    pub start_date: String,
    /// The last day, `YYYY-MM-DD`: on or after `start_date`, at most 16 days in
    /// all.
    #[schemars(pattern(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"))]
    pub end_date: String,
}

/// A forecast: where, and one entry per day.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct Weather {
    /// The place the forecast is for, as the geocoder resolved the city.
    pub place: Place,
    /// One entry per day, from `start_date` to `end_date`.
    pub days: Vec<Day>,
    /// The forecast in one or two sentences.
    pub summary: String,
}

// Its schema is an object: calls skip generating it (checked at load).
impl ObjectOutput for Weather {}

/// A resolved place.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct Place {
    /// Its name, such as `Berlin`.
    pub name: String,
    /// The state or province, if known, such as `Land Berlin`.
    pub region: Option<String>,
    /// The country's name, such as `Germany`.
    pub country: Option<String>,
    /// The ISO 3166-1 alpha-2 country code, such as `DE`.
    pub country_code: Option<String>,
    /// Latitude in degrees (WGS 84).
    pub latitude: f64,
    /// Longitude in degrees (WGS 84).
    pub longitude: f64,
    /// The IANA time zone the days are counted in, such as `Europe/Berlin`.
    pub timezone: String,
}

/// One day of a forecast. A value is `null` where the service has none
/// (precipitation probability, for instance, is not available for past days).
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct Day {
    /// The date, `YYYY-MM-DD`.
    pub date: String,
    /// Highest air temperature 2 m above ground, in °C.
    pub temperature_max_c: Option<f64>,
    /// Lowest air temperature 2 m above ground, in °C.
    pub temperature_min_c: Option<f64>,
    /// Chance of rain: the day's highest precipitation probability, in %.
    pub rain_chance_percent: Option<f64>,
    /// Strongest wind 10 m above ground, in km/h.
    pub wind_speed_max_kmh: Option<f64>,
}

/// Get the daily weather forecast for a city: highest and lowest
/// temperature (°C), chance of rain (%) and strongest wind (km/h) for each
/// day from `start_date` to `end_date` (at most 16 days; forecasts reach
/// about 16 days ahead). Dates are `YYYY-MM-DD` in the place's local time;
/// use `get_current_time` first if you need today's date. Returns the
/// resolved place (name, country, coordinates, time zone), one entry per
/// day, and a short summary.
#[tool(title = "Weather forecast", read_only, open_world)]
pub fn get_weather(args: WeatherArgs) -> Result<Weather, String> {
    forecast(&args, &Endpoints::from_env(), &fetch)
}

export!(get_weather);

/// How the tool reaches the network: one `GET` of a URL. A parameter so that
/// native tests can answer with canned responses.
type Fetch<'a> = &'a dyn Fn(&str) -> Result<http::Response, http::Error>;

fn fetch(url: &str) -> Result<http::Response, http::Error> {
    http::Request::get(url)
        .header("accept", "application/json")
        .timeout(REQUEST_TIMEOUT)
        .max_body_bytes(MAX_RESPONSE_BYTES)
        .send()
}

/// The base URLs of the two APIs, without a trailing slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// Base of `/v1/forecast`.
    pub forecast: String,
    /// Base of `/v1/search`.
    pub geocoding: String,
}

impl Endpoints {
    /// From `FORECAST_API_URL` and `GEOCODING_API_URL`, or Open-Meteo's
    /// public APIs.
    pub fn from_env() -> Self {
        let base = |name: &str, default: &str| {
            let value = std::env::var(name).unwrap_or_default();
            let value = value.trim();
            if value.is_empty() {
                default.to_owned()
            } else {
                value.trim_end_matches('/').to_owned()
            }
        };
        Endpoints {
            forecast: base("FORECAST_API_URL", DEFAULT_FORECAST_API_URL),
            geocoding: base("GEOCODING_API_URL", DEFAULT_GEOCODING_API_URL),
        }
    }
}

/// `get_weather` with its endpoints and network access given.
fn forecast(
    args: &WeatherArgs,
    endpoints: &Endpoints,
    fetch: Fetch<'_>,
) -> Result<Weather, String> {
    let query = Query::from_args(args)?;
    let found = geocode(&query, endpoints, fetch)?;

    let url = format!(
        "{}/v1/forecast?latitude={}&longitude={}\
         &daily=temperature_2m_max,temperature_2m_min,precipitation_probability_max,wind_speed_10m_max\
         &timezone=auto&start_date={}&end_date={}",
        endpoints.forecast, found.latitude, found.longitude, query.start, query.end
    );
    let response = fetch(&url).map_err(|error| error.to_string())?;
    if !response.is_success() {
        return Err(format!(
            "{}; dates must lie in the range the service accepts (about 3 months back to 16 \
             days ahead)",
            service_error("forecast", &response)
        ));
    }
    let body: ForecastResponse = response.json().map_err(|error| error.to_string())?;
    let Some(daily) = body.daily else {
        return Err(format!(
            "the forecast service at {} answered without daily values; try again later",
            response.url
        ));
    };
    let days = daily.days();
    if days.is_empty() {
        return Err(format!(
            "the forecast service has no days from {} to {}; pick dates no more than 16 days ahead",
            query.start, query.end
        ));
    }
    let place = Place {
        name: found.name,
        region: found.admin1,
        country: found.country,
        country_code: found.country_code,
        latitude: found.latitude,
        longitude: found.longitude,
        timezone: body
            .timezone
            .or(found.timezone)
            .unwrap_or_else(|| "GMT".into()),
    };
    let summary = summarise(&place, &days);
    Ok(Weather {
        place,
        days,
        summary,
    })
}

/// Validated arguments.
#[derive(Debug, PartialEq, Eq)]
struct Query {
    city: String,
    country: Option<String>,
    start: Date,
    end: Date,
}

impl Query {
    fn from_args(args: &WeatherArgs) -> Result<Query, String> {
        let city = args.city.trim();
        if city.is_empty() {
            return Err("`city` is empty; give a city name such as `Berlin`".into());
        }
        let country = match args.country.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(code) if code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic()) => {
                Some(code.to_ascii_uppercase())
            }
            Some(code) => {
                return Err(format!(
                    "`country` must be a two-letter ISO 3166-1 code such as `DE` or `US`, not \
                     `{code}`; or leave it out"
                ));
            }
        };
        let start = Date::parse("start_date", &args.start_date)?;
        let end = Date::parse("end_date", &args.end_date)?;
        if end < start {
            return Err(format!(
                "`end_date` {end} is before `start_date` {start}; give the earlier date first"
            ));
        }
        let days = end.days_since_epoch() - start.days_since_epoch() + 1;
        if days > MAX_DAYS {
            return Err(format!(
                "{start} to {end} is {days} days; ask for at most {MAX_DAYS} days per call"
            ));
        }
        Ok(Query {
            city: city.to_owned(),
            country,
            start,
            end,
        })
    }
}

/// A calendar date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Date {
    year: i64,
    month: i64,
    day: i64,
}

impl Date {
    fn parse(field: &str, text: &str) -> Result<Date, String> {
        let invalid = || {
            format!("`{field}` must be a date as YYYY-MM-DD, such as `2026-03-01`, not `{text}`")
        };
        let text = text.trim();
        let parts: Vec<&str> = text.split('-').collect();
        let [year, month, day] = parts[..] else {
            return Err(invalid());
        };
        if year.len() != 4 || month.len() != 2 || day.len() != 2 {
            return Err(invalid());
        }
        let number = |part: &str| {
            part.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| part.parse::<i64>().ok())
                .flatten()
                .ok_or_else(invalid)
        };
        let date = Date {
            year: number(year)?,
            month: number(month)?,
            day: number(day)?,
        };
        if !(1..=12).contains(&date.month) || date.day < 1 || date.day > date.days_in_month() {
            return Err(format!(
                "`{field}` is `{text}`, which is not a day of the calendar"
            ));
        }
        Ok(date)
    }

    fn days_in_month(self) -> i64 {
        match self.month {
            2 if self.year % 4 == 0 && (self.year % 100 != 0 || self.year % 400 == 0) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }

    /// Days since 1970-01-01 (proleptic Gregorian).
    fn days_since_epoch(self) -> i64 {
        let year = if self.month <= 2 {
            self.year - 1
        } else {
            self.year
        };
        let era = year.div_euclid(400);
        let year_of_era = year - era * 400;
        let month = (self.month + 9) % 12;
        let day_of_year = (153 * month + 2) / 5 + self.day - 1;
        let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
        era * 146_097 + day_of_era - 719_468
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// One result of Open-Meteo's geocoding search.
#[derive(Debug, Deserialize)]
struct GeoResult {
    name: String,
    latitude: f64,
    longitude: f64,
    #[serde(default)]
    country: Option<String>,
    #[serde(default)]
    country_code: Option<String>,
    #[serde(default)]
    admin1: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
}

/// Open-Meteo leaves `results` out when nothing matches.
#[derive(Debug, Deserialize)]
struct GeoResponse {
    #[serde(default)]
    results: Vec<GeoResult>,
}

fn geocode(query: &Query, endpoints: &Endpoints, fetch: Fetch<'_>) -> Result<GeoResult, String> {
    let mut url = format!(
        "{}/v1/search?name={}&count=1&language=en&format=json",
        endpoints.geocoding,
        http::encode_component(&query.city)
    );
    if let Some(country) = &query.country {
        url.push_str("&countryCode=");
        url.push_str(country);
    }
    let response = fetch(&url).map_err(|error| error.to_string())?;
    if !response.is_success() {
        return Err(service_error("geocoding", &response));
    }
    let body: GeoResponse = response.json().map_err(|error| error.to_string())?;
    body.results.into_iter().next().ok_or_else(|| match &query.country {
        Some(country) => format!(
            "no place called `{}` was found in country `{country}`; check the spelling and the \
             country code, try the English or local name, or leave `country` out",
            query.city
        ),
        None => format!(
            "no place called `{}` was found; check the spelling, try the English or local name, \
             or give just the city (no region or postcode)",
            query.city
        ),
    })
}

/// Open-Meteo's error body: `{"error": true, "reason": "..."}`.
#[derive(Debug, Deserialize)]
struct ApiError {
    reason: String,
}

/// "the forecast service at URL answered HTTP 400: <its reason>".
fn service_error(service: &str, response: &http::Response) -> String {
    let reason = match response.json::<ApiError>() {
        Ok(error) => error.reason,
        Err(_) => {
            let text = response.text();
            let text = text.trim();
            match text.char_indices().nth(200) {
                Some((end, _)) => format!("{}…", &text[..end]),
                None if text.is_empty() => "(no explanation)".into(),
                None => text.to_owned(),
            }
        }
    };
    format!(
        "the {service} service at {} answered HTTP {}: {reason}",
        response.url, response.status
    )
}

#[derive(Debug, Deserialize)]
struct ForecastResponse {
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    daily: Option<Daily>,
}

/// Open-Meteo's daily block: one array per variable, parallel to `time`.
#[derive(Debug, Deserialize)]
struct Daily {
    time: Vec<String>,
    #[serde(default)]
    temperature_2m_max: Vec<Option<f64>>,
    #[serde(default)]
    temperature_2m_min: Vec<Option<f64>>,
    #[serde(default)]
    precipitation_probability_max: Vec<Option<f64>>,
    #[serde(default)]
    wind_speed_10m_max: Vec<Option<f64>>,
}

impl Daily {
    fn days(&self) -> Vec<Day> {
        let at = |values: &[Option<f64>], index: usize| values.get(index).copied().flatten();
        self.time
            .iter()
            .enumerate()
            .map(|(index, date)| Day {
                date: date.clone(),
                temperature_max_c: at(&self.temperature_2m_max, index),
                temperature_min_c: at(&self.temperature_2m_min, index),
                rain_chance_percent: at(&self.precipitation_probability_max, index),
                wind_speed_max_kmh: at(&self.wind_speed_10m_max, index),
            })
            .collect()
    }
}

/// "Berlin, Germany, 2026-03-01 to 2026-03-03: highs 4.1 to 8 °C, lows …".
fn summarise(place: &Place, days: &[Day]) -> String {
    let mut label = place.name.clone();
    if let Some(country) = &place.country {
        label.push_str(", ");
        label.push_str(country);
    }
    let (first, last) = match (days.first(), days.last()) {
        (Some(first), Some(last)) if days.len() > 1 => (first, last),
        (Some(only), _) => {
            let mut parts = Vec::new();
            if let Some(high) = only.temperature_max_c {
                parts.push(format!("high {} °C", number(high)));
            }
            if let Some(low) = only.temperature_min_c {
                parts.push(format!("low {} °C", number(low)));
            }
            if let Some(rain) = only.rain_chance_percent {
                parts.push(format!("{}% chance of rain", number(rain)));
            }
            if let Some(wind) = only.wind_speed_max_kmh {
                parts.push(format!("wind up to {} km/h", number(wind)));
            }
            return format!("{label} on {}: {}.", only.date, or_no_data(&parts));
        }
        _ => return format!("{label}: no days."),
    };
    let mut parts = Vec::new();
    if let Some(range) = range(days, |d| d.temperature_max_c) {
        parts.push(format!("highs {range} °C"));
    }
    if let Some(range) = range(days, |d| d.temperature_min_c) {
        parts.push(format!("lows {range} °C"));
    }
    if let Some((rain, date)) = peak(days, |d| d.rain_chance_percent) {
        parts.push(format!("chance of rain up to {}% ({date})", number(rain)));
    }
    if let Some((wind, date)) = peak(days, |d| d.wind_speed_max_kmh) {
        parts.push(format!("wind up to {} km/h ({date})", number(wind)));
    }
    format!(
        "{label}, {} to {}: {}.",
        first.date,
        last.date,
        or_no_data(&parts)
    )
}

fn or_no_data(parts: &[String]) -> String {
    if parts.is_empty() {
        "no values available".into()
    } else {
        parts.join(", ")
    }
}

/// "4.1 to 8", or one number when all days agree.
fn range(days: &[Day], value: impl Fn(&Day) -> Option<f64>) -> Option<String> {
    let values: Vec<f64> = days.iter().filter_map(value).collect();
    let low = values.iter().copied().reduce(f64::min)?;
    let high = values.iter().copied().reduce(f64::max)?;
    Some(if low == high {
        number(low)
    } else {
        format!("{} to {}", number(low), number(high))
    })
}

/// The highest value and the first day it occurs.
fn peak(days: &[Day], value: impl Fn(&Day) -> Option<f64>) -> Option<(f64, &str)> {
    days.iter()
        .filter_map(|day| value(day).map(|v| (v, day.date.as_str())))
        .fold(None, |best, (v, date)| match best {
            Some((top, _)) if top >= v => best,
            _ => Some((v, date)),
        })
}

/// One decimal at most: `8`, `4.1`, `-0.5`.
fn number(value: f64) -> String {
    let rounded = (value * 10.0).round() / 10.0;
    if rounded == 0.0 {
        "0".into()
    } else {
        format!("{rounded}")
    }
}

#[cfg(test)]
mod tests;
