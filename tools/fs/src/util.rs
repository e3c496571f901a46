//! Small helpers: error wording, sizes, times, file URLs, name order.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::io;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// `cannot <action> `<path>`: <why>`, with the I/O error in words a model can
/// act on.
pub fn io_error(action: &str, path: &Path, error: &io::Error) -> String {
    let path = path.display();
    let why = match error.kind() {
        io::ErrorKind::NotFound => "it does not exist".to_owned(),
        io::ErrorKind::PermissionDenied => format!(
            "access denied ({error}); the sandbox refuses anything outside the allowed roots \
             (such as a symlink leading out of them) and any change under a read-only root"
        ),
        io::ErrorKind::ReadOnlyFilesystem => {
            "it is on a read-only filesystem or under a read-only root".to_owned()
        }
        io::ErrorKind::IsADirectory => "it is a directory".to_owned(),
        io::ErrorKind::NotADirectory => "a component of the path is not a directory".to_owned(),
        io::ErrorKind::AlreadyExists => "it already exists".to_owned(),
        io::ErrorKind::DirectoryNotEmpty => "the directory is not empty".to_owned(),
        io::ErrorKind::InvalidFilename => "the file name is invalid or too long".to_owned(),
        io::ErrorKind::StorageFull => "the disk is full".to_owned(),
        io::ErrorKind::QuotaExceeded => "the disk quota is exceeded".to_owned(),
        io::ErrorKind::FileTooLarge => "the file is too large".to_owned(),
        io::ErrorKind::CrossesDevices => "it would cross filesystems".to_owned(),
        _ => error.to_string(),
    };
    format!("cannot {action} `{path}`: {why}")
}

/// A byte count as the reference server prints it: `0 B`, `512 B`,
/// `1.50 KB`, `2.00 MB` (powers of 1024, two decimals, halves rounded up).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes} B");
    }
    // Exact fixed-point rounding: hundredths = round(bytes * 100 / 1024^unit).
    let scale = 1u128 << (10 * unit);
    let hundredths = (u128::from(bytes) * 200 + scale) / (2 * scale);
    format!(
        "{}.{:02} {}",
        hundredths / 100,
        hundredths % 100,
        UNITS[unit]
    )
}

/// A time as ISO 8601 in UTC with milliseconds, `2026-07-01T12:00:00.000Z`
/// (times before 1970 too; one outside jiff's range, ±9999 years, is shown
/// as that range's end).
pub fn iso_time(time: SystemTime) -> String {
    let timestamp =
        jiff::Timestamp::try_from(time).unwrap_or(match time.duration_since(UNIX_EPOCH) {
            Ok(_) => jiff::Timestamp::MAX,
            Err(_) => jiff::Timestamp::MIN,
        });
    timestamp.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// What stays as it is in a `file://` URL path: letters, digits, `/` and
/// `-._~`; everything else is percent-encoded.
const URL_PATH: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A `file://` URL for an absolute path, percent-encoding what is not a URL
/// path character.
pub fn file_url(path: &Path) -> String {
    format!(
        "file://{}",
        percent_encoding::utf8_percent_encode(&path.to_string_lossy(), URL_PATH)
    )
}

/// The order names are listed in: case-insensitive, then bytewise, so the
/// listing is stable whatever order the directory returns.
pub fn name_order(a: &str, b: &str) -> Ordering {
    keyed_order(&lowercase(a), a, &lowercase(b), b)
}

/// [`name_order`] with each name's lowercase key (`key_a` of `a`, `key_b`
/// of `b`) already made, for a sort that makes each key once.
pub fn keyed_order(key_a: &str, a: &str, key_b: &str, b: &str) -> Ordering {
    bytes_order(key_a.as_bytes(), key_b.as_bytes())
        .then_with(|| bytes_order(a.as_bytes(), b.as_bytes()))
}

/// `items` in [`name_order`] of `name(item)`, each lowercase key made once.
///
/// A few items are sorted as they are. Past [`FEW_NAMES`], names in one
/// folder often share a long prefix (`IMG_`, a date, a project's name), and
/// a comparison of two names spends most of its time on it. So the keys'
/// common prefix is found once, and each item is sorted as a pair of an
/// integer (the eight bytes of its key after that prefix, big-endian,
/// zero-padded) and its index: most comparisons are one integer comparison,
/// and the pairs move instead of the items. Equal integers fall back to the
/// whole rule. A key cannot hold a zero byte (names cannot), so the padding
/// orders a key that ends within the eight bytes before any key it is a
/// prefix of, as `cmp` does. A 1,000-entry listing whose names share 24
/// bytes: 5,436,840 units of fuel before, 3,974,396 after
/// (docs/benchmarks.md, round twenty-two).
pub fn sort_by_name<T>(items: Vec<T>, name: impl Fn(&T) -> &str) -> Vec<T> {
    if items.len() <= FEW_NAMES {
        // The lowercase key kept only where it differs from the name.
        let mut keyed: Vec<(Option<String>, T)> = items
            .into_iter()
            .map(|item| match lowercase(name(&item)) {
                Cow::Borrowed(_) => (None, item),
                Cow::Owned(key) => (Some(key), item),
            })
            .collect();
        // Names in one folder differ, so the order is total and an
        // unstable sort gives the same result as a stable one.
        keyed.sort_unstable_by(|(ka, a), (kb, b)| {
            let (a, b) = (name(a), name(b));
            keyed_order(ka.as_deref().unwrap_or(a), a, kb.as_deref().unwrap_or(b), b)
        });
        return keyed.into_iter().map(|(_, item)| item).collect();
    }
    let order = name_sorted(&items.iter().map(name).collect::<Vec<_>>());
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|index| slots[index].take())
        .collect()
}

/// How many items [`sort_by_name`] sorts as they are: below this, the
/// prefix and the index pairs cost more than they save (a 10-entry listing
/// took 5% more fuel with them).
const FEW_NAMES: usize = 32;

/// The indices of `names` in [`name_order`]; see [`sort_by_name`]. Not
/// generic and never inlined, so the sort's code is in the component once.
#[inline(never)]
fn name_sorted(names: &[&str]) -> Vec<usize> {
    let keys: Vec<Cow<'_, str>> = names.iter().map(|name| lowercase(name)).collect();
    let common = keys.first().map_or(0, |first| {
        let first = first.as_bytes();
        keys[1..].iter().fold(first.len(), |common, key| {
            common_prefix(&first[..common], key.as_bytes())
        })
    });
    let mut order: Vec<(u64, usize)> = keys
        .iter()
        .enumerate()
        .map(|(index, key)| {
            let rest = key.as_bytes().get(common..).unwrap_or_default();
            let mut window = [0u8; 8];
            let len = rest.len().min(8);
            window[..len].copy_from_slice(&rest[..len]);
            (u64::from_be_bytes(window), index)
        })
        .collect();
    order.sort_unstable_by(|(wa, a), (wb, b)| {
        wa.cmp(wb)
            .then_with(|| keyed_order(&keys[*a], names[*a], &keys[*b], names[*b]))
    });
    order.into_iter().map(|(_, index)| index).collect()
}

/// How many leading bytes `a` and `b` share, eight at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let common = a.len().min(b.len());
    let (xs, _) = a[..common].as_chunks::<8>();
    let (ys, _) = b[..common].as_chunks::<8>();
    let mut at = 0;
    for (x, y) in xs.iter().zip(ys) {
        let diff = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        if diff != 0 {
            return at + (diff.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + a[at..common]
        .iter()
        .zip(&b[at..common])
        .take_while(|(x, y)| x == y)
        .count()
}

/// `a.cmp(b)`, eight bytes at a time. `cmp` calls the C library's
/// `memcmp`, which in the component (wasi-libc, without SIMD) compares one
/// byte at a time: names in one folder often share a long prefix, and
/// those comparisons took 12% of the server's time in a 1,000-entry
/// listing (docs/benchmarks.md, round nineteen).
pub fn bytes_order(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    let (xs, x_rest) = a[..common].as_chunks::<8>();
    let (ys, y_rest) = b[..common].as_chunks::<8>();
    for (x, y) in xs.iter().zip(ys) {
        if u64::from_ne_bytes(*x) != u64::from_ne_bytes(*y) {
            // Read big-endian, the first byte weighs most, as in `cmp`.
            return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
        }
    }
    for (x, y) in x_rest.iter().zip(y_rest) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// `name` lowercased, borrowed when lowercasing cannot change it (ASCII
/// without capitals: most names). A copy for every name took 2.1% of a
/// 10-entry listing's instructions (docs/benchmarks.md, round ten).
pub fn lowercase(name: &str) -> Cow<'_, str> {
    if name
        .bytes()
        .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
    {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(name.to_lowercase())
    }
}

/// A fresh random number for temporary file names (the standard library's
/// hasher keys come from the WASI random source).
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    RandomState::new().hash_one(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bytes_order_is_cmp() {
        // Every length to 24, each pair differing at every position (or
        // not at all), by a low and a high byte, since `u64` chunks must
        // not change how bytes above 0x7f order.
        let mut cases: Vec<Vec<u8>> = vec![Vec::new()];
        for len in 1..=24 {
            let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            cases.push(base.clone());
            for at in 0..len {
                for byte in [0x00, b'A', b'z', 0x7f, 0x80, 0xff] {
                    let mut changed = base.clone();
                    changed[at as usize] = byte;
                    cases.push(changed);
                }
            }
        }
        for a in &cases {
            for b in &cases {
                assert_eq!(bytes_order(a, b), a.cmp(b), "{a:?} against {b:?}");
            }
        }
    }

    #[test]
    fn common_prefix_counts_shared_bytes() {
        for (a, b, n) in [
            ("", "", 0),
            ("abc", "", 0),
            ("abc", "abd", 2),
            ("abcdefgh", "abcdefgh", 8),
            ("abcdefghij", "abcdefghik", 9),
            ("abcdefgX", "abcdefgY", 7),
            (
                "file-with-a-longer-name-1",
                "file-with-a-longer-name-10",
                25,
            ),
        ] {
            assert_eq!(common_prefix(a.as_bytes(), b.as_bytes()), n, "{a:?} {b:?}");
            assert_eq!(common_prefix(b.as_bytes(), a.as_bytes()), n, "{b:?} {a:?}");
        }
    }

    #[test]
    fn sort_by_name_is_name_order() {
        // Sets of names sharing prefixes of every length around the eight
        // bytes compared at once, in both cases, with letters whose
        // lowercase is longer or shorter than they are, and names that are
        // prefixes of others; each set shuffled, then sorted by `sort_by_name`
        // and by `name_order`.
        let stems = [
            "",
            "a",
            "abcdefg",
            "abcdefgh",
            "abcdefghi",
            "IMG_2024-06-",
            "Straße-",
            "İx",
        ];
        let tails = [
            "",
            "0",
            "1",
            "10",
            "2",
            "a",
            "A",
            "b",
            "B",
            "ä",
            "Ä",
            "é",
            "É",
            "ß",
            "SS",
            "ss",
            "İ",
            "i̇",
            "z",
            "Zz",
            "~",
            "\u{7f}",
            "\u{80}",
            "\u{10ffff}",
            "abcdefgh",
            "ABCDEFGHI",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for stem in stems {
            for extra in ["", stem] {
                let mut names: Vec<String> = tails
                    .iter()
                    .flat_map(|t| tails.iter().map(move |u| format!("{stem}{extra}{t}{u}")))
                    .collect();
                names.sort();
                names.dedup();
                for i in (1..names.len()).rev() {
                    names.swap(i, (next() % (i as u64 + 1)) as usize);
                }
                // Both of `sort_by_name`'s paths: a few names, and more.
                for n in [0, 1, 2, 7, FEW_NAMES, FEW_NAMES + 1, 100, names.len()] {
                    let some = names[..n].to_vec();
                    let mut expected = some.clone();
                    expected.sort_by(|a, b| name_order(a, b));
                    let sorted = sort_by_name(some, |n| n.as_str());
                    assert_eq!(sorted, expected, "stem {stem:?}{extra:?}, {n} names");
                }
            }
        }
    }

    #[test]
    fn sizes_match_the_reference_format() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1.00 KB");
        assert_eq!(format_size(1152), "1.13 KB"); // 1.125: half rounds up, like toFixed
        assert_eq!(format_size(1536), "1.50 KB");
        assert_eq!(format_size(5 * 1024 * 1024), "5.00 MB");
        assert_eq!(format_size(u64::MAX), "16777216.00 TB");
    }

    #[test]
    fn times_are_iso_utc() {
        assert_eq!(iso_time(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_782_907_200_123);
        assert_eq!(iso_time(t), "2026-07-01T12:00:00.123Z");
        let t = UNIX_EPOCH - Duration::from_millis(1);
        assert_eq!(iso_time(t), "1969-12-31T23:59:59.999Z");
        assert_eq!(
            iso_time(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn file_urls_are_encoded() {
        assert_eq!(
            file_url(Path::new("/a b/c#d.png")),
            "file:///a%20b/c%23d.png"
        );
    }
}
