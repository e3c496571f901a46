//! `count_primes`: pure computation, no I/O, for the benchmarks.
//!
//! A sieve of Eratosthenes over `below` numbers, then a checksum over the
//! primes found: loads, stores, branches and integer arithmetic in tight
//! loops, which is where fuel metering costs the most (every basic block
//! pays for its instructions). The result depends on every iteration, so
//! nothing can be folded away.

use serde::{Deserialize, Serialize};
use toolcage_guest::{JsonSchema, export, tool};

/// The largest `below` accepted: the sieve takes one byte per number.
const MAX_BELOW: u32 = 64 * 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
struct CountPrimesArgs {
    /// Count the primes below this number (at most 67108864).
    below: u32,
}

#[derive(Serialize, JsonSchema)]
struct PrimeCount {
    /// How many primes are below `below`.
    count: u32,
    /// The largest of them (0 if none).
    largest: u32,
    /// A checksum over all of them, in order.
    checksum: u64,
}

/// Count the primes below a number with a sieve of Eratosthenes. Returns the
/// count, the largest prime and a checksum over all of them. A benchmark
/// tool: it only computes.
#[tool(read_only, idempotent)]
fn count_primes(args: CountPrimesArgs) -> Result<PrimeCount, String> {
    if args.below > MAX_BELOW {
        return Err(format!(
            "`below` is {}, over the limit of {MAX_BELOW}",
            args.below
        ));
    }
    Ok(sieve(args.below))
}

fn sieve(below: u32) -> PrimeCount {
    let n = below as usize;
    let mut composite = vec![false; n];
    let mut count = 0;
    let mut largest = 0;
    let mut checksum: u64 = 0xcbf2_9ce4_8422_2325;
    for i in 2..n {
        if composite[i] {
            continue;
        }
        count += 1;
        largest = i as u32;
        checksum = (checksum ^ i as u64).wrapping_mul(0x0100_0000_01b3);
        // `i * i` overflows a 32-bit usize for i >= 65536, and is past the
        // end of the sieve anyway.
        let Some(mut multiple) = i.checked_mul(i) else {
            continue;
        };
        while multiple < n {
            composite[multiple] = true;
            multiple += i;
        }
    }
    PrimeCount {
        count,
        largest,
        checksum,
    }
}

export!(count_primes);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_small_ranges() {
        assert_eq!(sieve(0).count, 0);
        assert_eq!(sieve(2).count, 0);
        assert_eq!(sieve(3).count, 1);
        let hundred = sieve(100);
        assert_eq!((hundred.count, hundred.largest), (25, 97));
        assert_eq!(sieve(1_000_000).count, 78_498);
    }
}
