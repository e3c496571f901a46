//! `time`: the current time in any IANA time zone, and conversions between
//! zones. The time zone database is compiled into the component (jiff's
//! bundled tzdb), because a sandboxed tool cannot read `/usr/share/zoneinfo`.

use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use serde::{Deserialize, Serialize};
use toolcage_guest::{JsonSchema, ObjectOutput, export, tool};

/// Arguments of `get_current_time`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CurrentTimeArgs {
    /// IANA time zone name, such as `Europe/Paris` or `America/New_York`.
    /// Defaults to `UTC`.
    #[serde(default)]
    pub timezone: Option<String>,
}

/// A moment in one time zone.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ZonedTime {
    /// The IANA time zone name.
    pub timezone: String,
    /// The time in ISO 8601 (RFC 3339) with the zone's UTC offset, e.g.
    /// `2026-03-01T14:05:00+01:00`.
    pub datetime: String,
    /// The zone's offset from UTC at that moment, e.g. `+01:00`.
    pub utc_offset: String,
    /// Whether daylight saving time is in effect at that moment.
    pub is_dst: bool,
    /// The day of the week, e.g. `Sunday`.
    pub day_of_week: String,
}

// Its schema is an object: no schema generated per call to decide how to
// send it (most of the SDK's work in a call).
impl ObjectOutput for ZonedTime {}

/// Get the current date and time in an IANA time zone (default UTC).
/// Returns ISO 8601 with the UTC offset, the offset itself, whether daylight
/// saving time is in effect and the day of the week.
#[tool(title = "Current time", read_only, idempotent)]
pub fn get_current_time(args: CurrentTimeArgs) -> Result<ZonedTime, String> {
    let name = args.timezone.as_deref().unwrap_or("UTC");
    let zone = time_zone(name)?;
    Ok(describe(Timestamp::now().to_zoned(zone), name))
}

/// Arguments of `convert_timezone`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConvertArgs {
    /// The time to convert, in ISO 8601 with an offset (`2026-03-01T09:30:00Z`,
    /// `2026-03-01T09:30:00-05:00`) or with a bracketed zone
    /// (`2026-03-01T09:30:00[America/New_York]`).
    pub time: String,
    /// The IANA time zone to convert to, such as `Asia/Tokyo`.
    pub timezone: String,
}

/// The result of a conversion.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Conversion {
    /// The input time, normalised to ISO 8601 with its offset.
    pub source: String,
    /// The same instant in the target zone.
    pub converted: ZonedTime,
    /// The target zone's offset from UTC at that instant, e.g. `+09:00`.
    pub utc_offset: String,
}

impl ObjectOutput for Conversion {}

/// Convert a time given in ISO 8601 to another IANA time zone. Returns the
/// same instant in the target zone and the zone's UTC offset at that instant.
#[tool(title = "Convert time zone", read_only, idempotent)]
pub fn convert_timezone(args: ConvertArgs) -> Result<Conversion, String> {
    let zone = time_zone(&args.timezone)?;
    let instant = parse_time(&args.time)?;
    let converted = describe(instant.to_zoned(zone), &args.timezone);
    Ok(Conversion {
        source: instant.to_string(),
        utc_offset: converted.utc_offset.clone(),
        converted,
    })
}

fn time_zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name).map_err(|_| {
        format!(
            "unknown time zone `{name}`; use an IANA name such as `Europe/Paris`, \
             `America/New_York` or `UTC`"
        )
    })
}

/// Accepts RFC 3339 / ISO 8601 with an offset, or RFC 9557 with a zone.
fn parse_time(text: &str) -> Result<Timestamp, String> {
    if let Ok(timestamp) = text.parse::<Timestamp>() {
        return Ok(timestamp);
    }
    if let Ok(zoned) = text.parse::<Zoned>() {
        return Ok(zoned.timestamp());
    }
    Err(format!(
        "cannot parse time `{text}`; give ISO 8601 with an offset, such as \
         `2026-03-01T09:30:00Z` or `2026-03-01T09:30:00+01:00`"
    ))
}

fn describe(zoned: Zoned, name: &str) -> ZonedTime {
    let info = zoned.time_zone().to_offset_info(zoned.timestamp());
    ZonedTime {
        timezone: name.to_owned(),
        datetime: zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
        utc_offset: zoned.strftime("%:z").to_string(),
        is_dst: info.dst().is_dst(),
        day_of_week: format!("{:?}", zoned.weekday()),
    }
}

export!(get_current_time, convert_timezone);

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(time: &str, timezone: &str) -> Result<Conversion, String> {
        convert_timezone(ConvertArgs {
            time: time.into(),
            timezone: timezone.into(),
        })
    }

    #[test]
    fn converts_across_zones_with_dst() {
        let c = convert("2026-07-01T12:00:00Z", "Europe/Paris").expect("converts");
        assert_eq!(c.converted.datetime, "2026-07-01T14:00:00+02:00");
        assert_eq!(c.utc_offset, "+02:00");
        assert!(c.converted.is_dst);
        let c = convert("2026-01-15T09:30:00-05:00", "Asia/Kolkata").expect("converts");
        assert_eq!(c.converted.datetime, "2026-01-15T20:00:00+05:30");
        assert_eq!(c.converted.day_of_week, "Thursday");
    }

    #[test]
    fn accepts_a_bracketed_zone() {
        let c = convert("2026-03-01T09:30:00[America/New_York]", "UTC").expect("converts");
        assert_eq!(c.converted.datetime, "2026-03-01T14:30:00+00:00");
    }

    #[test]
    fn bad_values_are_named() {
        let e = convert("2026-07-01T12:00:00Z", "Mars/Olympus").unwrap_err();
        assert!(e.contains("`Mars/Olympus`"), "{e}");
        let e = convert("yesterday-ish", "UTC").unwrap_err();
        assert!(e.contains("`yesterday-ish`"), "{e}");
    }

    #[test]
    fn current_time_defaults_to_utc() {
        let now = get_current_time(CurrentTimeArgs { timezone: None }).expect("now");
        assert_eq!(now.timezone, "UTC");
        assert!(now.datetime.ends_with("+00:00"), "{}", now.datetime);
    }

    #[test]
    fn the_component_describes_both_tools() {
        let names: Vec<_> = tool_definitions().iter().map(|t| t.name()).collect();
        assert_eq!(names, ["get_current_time", "convert_timezone"]);
    }
}
