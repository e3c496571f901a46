use std::cell::RefCell;

use serde_json::json;

use super::*;

fn args(city: &str, country: Option<&str>, start: &str, end: &str) -> WeatherArgs {
    WeatherArgs {
        city: city.into(),
        country: country.map(Into::into),
        start_date: start.into(),
        end_date: end.into(),
    }
}

fn endpoints() -> Endpoints {
    Endpoints {
        forecast: "http://forecast.test".into(),
        geocoding: "http://geo.test".into(),
    }
}

fn response(url: &str, status: u16, body: serde_json::Value) -> http::Response {
    http::Response {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string().into_bytes(),
        url: url.into(),
    }
}

fn berlin() -> serde_json::Value {
    json!({"results": [{
        "id": 2950159, "name": "Berlin", "latitude": 52.52437, "longitude": 13.41053,
        "country_code": "DE", "country": "Germany", "admin1": "Land Berlin",
        "timezone": "Europe/Berlin"
    }], "generationtime_ms": 0.5})
}

fn three_days() -> serde_json::Value {
    json!({
        "latitude": 52.52, "longitude": 13.41, "timezone": "Europe/Berlin",
        "daily_units": {"time": "iso8601", "temperature_2m_max": "°C"},
        "daily": {
            "time": ["2026-03-01", "2026-03-02", "2026-03-03"],
            "temperature_2m_max": [4.1, 8.0, 6.25],
            "temperature_2m_min": [-1.5, 0.0, 2.0],
            "precipitation_probability_max": [10, 80, null],
            "wind_speed_10m_max": [14.3, 25.0, 25.0]
        }
    })
}

/// A fake network: answers each URL with the first canned response whose
/// prefix matches, and records the URLs asked for.
struct Net {
    answers: Vec<(&'static str, u16, serde_json::Value)>,
    asked: RefCell<Vec<String>>,
}

impl Net {
    fn new(answers: Vec<(&'static str, u16, serde_json::Value)>) -> Self {
        Net {
            answers,
            asked: RefCell::new(Vec::new()),
        }
    }

    fn run(&self, args: &WeatherArgs) -> Result<Weather, String> {
        let fetch = |url: &str| {
            self.asked.borrow_mut().push(url.to_owned());
            let (_, status, body) = self
                .answers
                .iter()
                .find(|(prefix, _, _)| url.starts_with(prefix))
                .unwrap_or_else(|| panic!("unexpected request {url}"));
            Ok(response(url, *status, body.clone()))
        };
        forecast(args, &endpoints(), &fetch)
    }
}

#[test]
fn a_forecast_has_the_place_one_entry_per_day_and_a_summary() {
    let net = Net::new(vec![
        ("http://geo.test/", 200, berlin()),
        ("http://forecast.test/", 200, three_days()),
    ]);
    let weather = net
        .run(&args("Berlin", Some("de"), "2026-03-01", "2026-03-03"))
        .expect("forecast");
    assert_eq!(
        *net.asked.borrow(),
        [
            "http://geo.test/v1/search?name=Berlin&count=1&language=en&format=json&countryCode=DE",
            "http://forecast.test/v1/forecast?latitude=52.52437&longitude=13.41053\
             &daily=temperature_2m_max,temperature_2m_min,precipitation_probability_max,wind_speed_10m_max\
             &timezone=auto&start_date=2026-03-01&end_date=2026-03-03",
        ]
    );
    assert_eq!(
        weather.place,
        Place {
            name: "Berlin".into(),
            region: Some("Land Berlin".into()),
            country: Some("Germany".into()),
            country_code: Some("DE".into()),
            latitude: 52.52437,
            longitude: 13.41053,
            timezone: "Europe/Berlin".into(),
        }
    );
    assert_eq!(weather.days.len(), 3);
    assert_eq!(
        weather.days[1],
        Day {
            date: "2026-03-02".into(),
            temperature_max_c: Some(8.0),
            temperature_min_c: Some(0.0),
            rain_chance_percent: Some(80.0),
            wind_speed_max_kmh: Some(25.0),
        }
    );
    assert_eq!(weather.days[2].rain_chance_percent, None);
    assert_eq!(
        weather.summary,
        "Berlin, Germany, 2026-03-01 to 2026-03-03: highs 4.1 to 8 °C, lows -1.5 to 2 °C, \
         chance of rain up to 80% (2026-03-02), wind up to 25 km/h (2026-03-02)."
    );
}

#[test]
fn one_day_reads_as_one_day() {
    let net = Net::new(vec![
        ("http://geo.test/", 200, berlin()),
        (
            "http://forecast.test/",
            200,
            json!({"timezone": "Europe/Berlin", "daily": {
                "time": ["2026-03-01"], "temperature_2m_max": [4.0], "temperature_2m_min": [-1.0],
                "precipitation_probability_max": [null], "wind_speed_10m_max": [9.7]}}),
        ),
    ]);
    let weather = net
        .run(&args("Berlin", None, "2026-03-01", "2026-03-01"))
        .expect("forecast");
    assert_eq!(
        weather.summary,
        "Berlin, Germany on 2026-03-01: high 4 °C, low -1 °C, wind up to 9.7 km/h."
    );
}

#[test]
fn the_city_is_url_encoded() {
    let net = Net::new(vec![(
        "http://geo.test/",
        200,
        json!({"generationtime_ms": 0.1}),
    )]);
    let error = net
        .run(&args(" São Paulo & co ", None, "2026-03-01", "2026-03-02"))
        .expect_err("unknown");
    assert_eq!(
        net.asked.borrow()[0],
        "http://geo.test/v1/search?name=S%C3%A3o%20Paulo%20%26%20co&count=1&language=en&format=json"
    );
    assert!(
        error.contains("no place called `São Paulo & co` was found;"),
        "{error}"
    );
}

#[test]
fn an_unknown_city_says_what_to_try() {
    let net = Net::new(vec![(
        "http://geo.test/",
        200,
        json!({"generationtime_ms": 0.1}),
    )]);
    let error = net
        .run(&args("Atlantis", Some("GR"), "2026-03-01", "2026-03-02"))
        .expect_err("unknown");
    assert!(
        error.starts_with(
            "no place called `Atlantis` was found in country `GR`; check the spelling"
        ),
        "{error}"
    );
}

#[test]
fn api_errors_pass_the_services_reason_on() {
    let reason = "Parameter 'start_date' is out of allowed range from 2025-12-01 to 2026-03-16";
    let net = Net::new(vec![
        ("http://geo.test/", 200, berlin()),
        (
            "http://forecast.test/",
            400,
            json!({"error": true, "reason": reason}),
        ),
    ]);
    let error = net
        .run(&args("Berlin", None, "2020-01-01", "2020-01-02"))
        .expect_err("out of range");
    assert!(
        error.starts_with("the forecast service at http://forecast.test/v1/forecast?")
            && error.contains(&format!("answered HTTP 400: {reason}; dates must lie")),
        "{error}"
    );

    let net = Net::new(vec![(
        "http://geo.test/",
        503,
        json!("down for maintenance"),
    )]);
    let error = net
        .run(&args("Berlin", None, "2026-03-01", "2026-03-02"))
        .expect_err("down");
    assert!(
        error.contains("geocoding service") && error.contains("HTTP 503"),
        "{error}"
    );
}

#[test]
fn network_errors_are_passed_through_verbatim() {
    // Natively every request fails with the SDK's "no host" error; what the
    // tool returns is that error's text, untouched.
    let expected = http::get("http://geo.test/")
        .expect_err("native")
        .to_string();
    let error = forecast(
        &args("Berlin", None, "2026-03-01", "2026-03-02"),
        &endpoints(),
        &|url| http::get(url),
    )
    .expect_err("no network");
    assert_eq!(
        error,
        expected.replace(
            "http://geo.test/",
            "http://geo.test/v1/search?name=Berlin&count=1&language=en&format=json"
        )
    );
}

#[test]
fn arguments_are_checked_before_any_request() {
    let net = Net::new(vec![]);
    let cases = [
        (
            args("  ", None, "2026-03-01", "2026-03-02"),
            "`city` is empty",
        ),
        (
            args("Berlin", Some("DEU"), "2026-03-01", "2026-03-02"),
            "two-letter ISO 3166-1 code",
        ),
        (
            args("Berlin", None, "2026-3-1", "2026-03-02"),
            "`start_date` must be a date as YYYY-MM-DD",
        ),
        (
            args("Berlin", None, "2026-03-01", "tomorrow"),
            "`end_date` must be a date",
        ),
        (
            args("Berlin", None, "2026-02-29", "2026-03-02"),
            "not a day of the calendar",
        ),
        (
            args("Berlin", None, "2026-03-02", "2026-03-01"),
            "`end_date` 2026-03-01 is before",
        ),
        (
            args("Berlin", None, "2026-03-01", "2026-03-17"),
            "is 17 days; ask for at most 16",
        ),
        (
            args("Berlin", None, "2026-12-25", "2027-01-10"),
            "is 17 days",
        ),
    ];
    for (args, expected) in cases {
        let error = net.run(&args).expect_err("invalid");
        assert!(error.contains(expected), "{args:?}: {error}");
    }
    assert!(net.asked.borrow().is_empty());
    // Sixteen days, across a leap day, is fine.
    assert!(Query::from_args(&args("Berlin", None, "2028-02-20", "2028-03-06")).is_ok());
}

#[test]
fn dates_count_days_across_months_and_years() {
    let day = |text: &str| Date::parse("d", text).expect("date").days_since_epoch();
    assert_eq!(day("1970-01-01"), 0);
    assert_eq!(day("2000-03-01") - day("2000-02-28"), 2);
    assert_eq!(day("2100-03-01") - day("2100-02-28"), 1);
    assert_eq!(day("2027-01-01") - day("2026-12-31"), 1);
    assert_eq!(day("2026-03-01"), 20_513);
}

#[test]
fn base_urls_come_from_the_environment_without_trailing_slashes() {
    // The only test that touches the process environment.
    unsafe {
        std::env::set_var("FORECAST_API_URL", "http://127.0.0.1:9/");
        std::env::remove_var("GEOCODING_API_URL");
    }
    assert_eq!(
        Endpoints::from_env(),
        Endpoints {
            forecast: "http://127.0.0.1:9".into(),
            geocoding: DEFAULT_GEOCODING_API_URL.into(),
        }
    );
}

#[test]
fn the_component_describes_one_read_only_open_world_tool() {
    let tools = tool_definitions();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name(), "get_weather");
    let schema = tools[0].input_schema();
    assert_eq!(
        schema["required"],
        json!(["city", "start_date", "end_date"])
    );
    assert_eq!(
        schema["properties"]["start_date"]["pattern"],
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
    );
    assert!(tools[0].output_schema().is_some());
    let annotations = &toolcage_guest::__describe(&tools)[0].annotations;
    assert!(annotations.read_only && annotations.open_world && !annotations.destructive);
}
