//! Job arrays (as Slurm's `--array` and HyperQueue's): one spec submitted as many jobs with
//! consecutive numbers, element `i` seeing `COALLOC_ARRAY_INDEX=i`. An array is known by
//! its first job's number, `FIRST_[START-END]`; the driver keeps only `first -> (start,
//! count)` (a bookkeeping entry in the journal), not a record per element.

use super::Driver;
use crate::entry::Entry;
use crate::msg::ApiError;
use coalloc_core::model::Job;
use coalloc_core::scheduler::Reply;

/// The most elements one array may have.
pub const MAX_ARRAY: u32 = 1_000_000;

/// An array's indexes, `A-B` or `A` (inclusive).
pub fn parse_indexes(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("array `{text}`: expected indexes such as `0-999` or `7`");
    let (a, b) = match text.trim().split_once('-') {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (text.trim(), text.trim()),
    };
    let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if b < a {
        return Err(format!("array `{text}`: the last index is below the first"));
    }
    if b - a >= MAX_ARRAY {
        return Err(format!("array `{text}`: at most {MAX_ARRAY} elements"));
    }
    Ok((a, b))
}

/// How the API names element `index` of array `first`.
pub fn element_name(first: u64, index: u32) -> String {
    format!("{first}_{index}")
}

impl Driver {
    /// Submit `job` once per index of `start..=end`; the first job's number. Elements the
    /// scheduler refuses end the array there (it then holds the ones before).
    pub(crate) fn submit_array(
        &mut self,
        job: &Job,
        (start, end): (u32, u32),
    ) -> Result<u64, String> {
        let mut first = None;
        let mut count = 0;
        let mut refused = None;
        for _ in start..=end {
            let secret = self.rv.secrets.fresh().map_err(|e| e.to_string())?;
            match self.submit(job.clone(), secret) {
                Ok(Reply::Submitted(id)) => {
                    first.get_or_insert(id);
                    count += 1;
                    self.emit(serde_json::json!({"event": "submitted", "job": id}));
                }
                Ok(_) => break,
                Err(e) => {
                    refused = Some(e.to_string());
                    break;
                }
            }
        }
        let Some(first) = first else {
            return Err(refused.unwrap_or_else(|| "not accepted".into()));
        };
        let _ = self.apply(Entry::Array {
            first,
            start,
            count,
        });
        Ok(first)
    }

    /// The array job `job` is an element of: its first job and its index.
    pub(crate) fn array_of(&self, job: u64) -> Option<(u64, u32)> {
        let (&first, &(start, count)) = self.arrays.range(..=job).next_back()?;
        let offset = u32::try_from(job - first).ok()?;
        (offset < count).then_some((first, start + offset))
    }

    /// Cancel the elements of array `first` with indexes in `range` (every one: `None`)
    /// that have not ended; their numbers.
    pub(crate) fn cancel_array(
        &mut self,
        first: u64,
        range: Option<(u32, u32)>,
    ) -> Result<Vec<u64>, ApiError> {
        let &(start, count) = self
            .arrays
            .get(&first)
            .ok_or_else(|| ApiError::not_found(format!("no array {first}")))?;
        let (lo, hi) = range.unwrap_or((start, start + count - 1));
        let mut cancelled = Vec::new();
        for index in lo.max(start)..=hi.min(start + count - 1) {
            let job = first + u64::from(index - start);
            if self.core.job(job).is_some_and(|j| !j.ended())
                && self.apply(Entry::Cancel { job }).is_ok()
            {
                cancelled.push(job);
            }
        }
        Ok(cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_a_range_or_one() {
        assert_eq!(parse_indexes("0-999"), Ok((0, 999)));
        assert_eq!(parse_indexes(" 7 "), Ok((7, 7)));
        assert!(parse_indexes("9-3").unwrap_err().contains("below"));
        assert!(parse_indexes("a-b").is_err());
        assert!(parse_indexes("0-1000000").unwrap_err().contains("at most"));
        assert_eq!(element_name(12, 3), "12_3");
    }
}
