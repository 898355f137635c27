//! The order of the feasible clusters: total descending, then cluster name ascending.
//!
//! Totals usually span a few hundred values (weights times scores in [-100, 100]), so when the
//! clusters come in name order, as a sync gives them, a counting sort over the totals ranks them in
//! linear time; otherwise, or for a wide spread of totals, a comparison sort does.

use super::snapshot::ClusterId;

/// Widest spread of totals ranked by counting, beyond the number of clusters: keeps the count
/// table no larger than a few times the clusters themselves.
const COUNTING_SPREAD_SLACK: i128 = 4096;

/// Positions in `feasible` (parallel to `totals`), best first: total descending, then cluster id
/// ascending (ids are in name order), then position.
pub fn rank(feasible: &[ClusterId], totals: &[i64]) -> Vec<u32> {
    debug_assert_eq!(feasible.len(), totals.len());
    rank_by_counting(feasible, totals).unwrap_or_else(|| rank_by_sorting(feasible, totals))
}

/// Packed keys (inverted total, id, position) sort without indirection.
fn rank_by_sorting(feasible: &[ClusterId], totals: &[i64]) -> Vec<u32> {
    let mut keys: Vec<u128> = feasible
        .iter()
        .zip(totals)
        .enumerate()
        .map(|(pos, (id, total))| {
            let inverted = (i128::from(i64::MAX) - i128::from(*total)) as u128;
            (inverted << 64) | (u128::from(id.0) << 32) | pos as u128
        })
        .collect();
    keys.sort_unstable();
    keys.into_iter().map(|k| k as u32).collect()
}

/// A stable counting sort by total, descending. With `feasible` in id order, stability keeps
/// equal totals in id order and then position order, which is the order of [`rank_by_sorting`].
/// `None` when the clusters are not in id order or the totals spread too wide.
fn rank_by_counting(feasible: &[ClusterId], totals: &[i64]) -> Option<Vec<u32>> {
    if !feasible.is_sorted() {
        return None;
    }
    let (&min, &max) = (totals.iter().min()?, totals.iter().max()?);
    let spread = i128::from(max) - i128::from(min);
    if spread > totals.len() as i128 + COUNTING_SPREAD_SLACK {
        return None;
    }
    // Bucket b holds total `max - b`, so bucket order is total descending.
    let bucket = |total: i64| (i128::from(max) - i128::from(total)) as usize;
    let mut starts = vec![0u32; spread as usize + 2];
    for &total in totals {
        starts[bucket(total) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut ranking = vec![0u32; totals.len()];
    for (pos, &total) in totals.iter().enumerate() {
        let slot = &mut starts[bucket(total)];
        ranking[*slot as usize] = pos as u32;
        *slot += 1;
    }
    Some(ranking)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (the tests need no crate for it).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn counting_ranks_as_sorting_does() {
        let mut rng = Lcg(7);
        for case in 0..400 {
            let len = rng.next(300) as usize;
            let spread = [1, 3, 600, 10_000][case % 4];
            let mut ids: Vec<ClusterId> = (0..len as u32)
                .map(|i| ClusterId(i * 2 + rng.next(2) as u32))
                .collect();
            ids.sort_unstable();
            let totals: Vec<i64> = (0..len)
                .map(|_| rng.next(spread) as i64 - spread as i64 / 2)
                .collect();
            let counted = rank_by_counting(&ids, &totals);
            if spread <= 600 || len == 0 {
                assert!(counted.is_some() || len == 0, "case {case} should count");
            }
            if let Some(counted) = counted {
                assert_eq!(counted, rank_by_sorting(&ids, &totals), "case {case}");
            }
            assert_eq!(rank(&ids, &totals), rank_by_sorting(&ids, &totals), "case {case}");
        }
    }

    #[test]
    fn extreme_totals_and_unsorted_ids_fall_back() {
        let ids = [ClusterId(0), ClusterId(1), ClusterId(2)];
        let totals = [i64::MIN, i64::MAX, 0];
        assert_eq!(rank_by_counting(&ids, &totals), None);
        assert_eq!(rank(&ids, &totals), vec![1, 2, 0]);
        let unsorted = [ClusterId(2), ClusterId(0), ClusterId(1)];
        assert_eq!(rank_by_counting(&unsorted, &[5, 5, 5]), None);
        assert_eq!(rank(&unsorted, &[5, 5, 5]), vec![1, 2, 0]);
        assert_eq!(rank(&[], &[]), Vec::<u32>::new());
    }
}
