//! Devices: one memory budget each, best-fit placement, and rotation.

use serde::{Deserialize, Serialize};

/// The memory one device offers to trials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceBudget {
    /// A name for logs (`"cuda:0"`, `"sim:1"`).
    pub name: String,
    /// Bytes trials may use: the device total (or a smaller number the user
    /// gives, to reproduce a smaller card) minus headroom.
    pub usable: u64,
    /// The fixed cost of one worker process on the device (a CUDA context),
    /// in bytes; reserved once per running trial.
    pub context: u64,
}

impl DeviceBudget {
    /// A device with `total` bytes, of which `headroom` is kept free, and a
    /// per-process context cost of `context` bytes.
    pub fn new(name: impl Into<String>, total: u64, headroom: u64, context: u64) -> Self {
        DeviceBudget {
            name: name.into(),
            usable: total.saturating_sub(headroom),
            context,
        }
    }
}

#[derive(Debug, Clone)]
struct Device {
    budget: DeviceBudget,
    reserved: u64,
    running: usize,
    consecutive_faults: u32,
    out_of_rotation: Option<String>,
}

/// The devices of one machine and what is reserved on each.
///
/// A device whose trials fail `max_faults` times in a row for reasons other
/// than their own configuration (a worker killed by a signal, a device error)
/// is taken out of rotation: no trial is placed on it again, and the reason
/// is logged and kept ([`DeviceSet::out_of_rotation`]). The last device in
/// rotation is never retired (that would stop the study; the faults are
/// logged instead).
#[derive(Debug, Clone)]
pub struct DeviceSet {
    devices: Vec<Device>,
    max_faults: u32,
}

impl DeviceSet {
    /// Devices with these budgets; a device is retired after `max_faults`
    /// consecutive faults (at least 1).
    pub fn new(budgets: Vec<DeviceBudget>, max_faults: u32) -> Self {
        DeviceSet {
            devices: budgets
                .into_iter()
                .map(|budget| Device {
                    budget,
                    reserved: 0,
                    running: 0,
                    consecutive_faults: 0,
                    out_of_rotation: None,
                })
                .collect(),
            max_faults: max_faults.max(1),
        }
    }

    /// Number of devices, in rotation or not.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Whether there are no devices.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// The budget of device `d`.
    pub fn budget(&self, d: usize) -> Option<&DeviceBudget> {
        self.devices.get(d).map(|x| &x.budget)
    }

    /// Bytes reserved on device `d` by running trials (contexts included).
    pub fn reserved(&self, d: usize) -> u64 {
        self.devices.get(d).map_or(0, |x| x.reserved)
    }

    /// Trials running on device `d`.
    pub fn running(&self, d: usize) -> usize {
        self.devices.get(d).map_or(0, |x| x.running)
    }

    /// Why device `d` was taken out of rotation, if it was.
    pub fn out_of_rotation(&self, d: usize) -> Option<&str> {
        self.devices
            .get(d)
            .and_then(|x| x.out_of_rotation.as_deref())
    }

    /// Whether any device is still in rotation.
    pub fn any_in_rotation(&self) -> bool {
        self.devices.iter().any(|d| d.out_of_rotation.is_none())
    }

    /// The largest reservation (context included) a trial could get alone on
    /// some device in rotation: `need(context)` must be at most this.
    pub fn fits_alone(&self, need: impl Fn(u64) -> u64) -> bool {
        self.devices
            .iter()
            .filter(|d| d.out_of_rotation.is_none())
            .any(|d| need(d.budget.context) <= d.budget.usable)
    }

    /// The device a trial needing `need(context)` bytes fits on now, best fit
    /// (the one left with the least free memory), and the bytes to reserve.
    pub fn place(&self, need: impl Fn(u64) -> u64) -> Option<(usize, u64)> {
        self.devices
            .iter()
            .enumerate()
            .filter(|(_, d)| d.out_of_rotation.is_none())
            .filter_map(|(i, d)| {
                let bytes = need(d.budget.context);
                let free = d.budget.usable.checked_sub(d.reserved)?;
                (bytes <= free).then(|| (i, bytes, free - bytes))
            })
            .min_by_key(|&(i, _, left)| (left, i))
            .map(|(i, bytes, _)| (i, bytes))
    }

    /// Reserves `bytes` on device `d` for one trial.
    pub fn reserve(&mut self, d: usize, bytes: u64) {
        if let Some(x) = self.devices.get_mut(d) {
            x.reserved = x.reserved.saturating_add(bytes);
            x.running += 1;
        }
    }

    /// Releases one trial's reservation of `bytes` on device `d`.
    pub fn release(&mut self, d: usize, bytes: u64) {
        if let Some(x) = self.devices.get_mut(d) {
            x.reserved = x.reserved.saturating_sub(bytes);
            x.running = x.running.saturating_sub(1);
        }
    }

    /// Records how a trial on device `d` ended: `Some(reason)` for a device
    /// fault, `None` for anything else. Returns true when this fault took the
    /// device out of rotation.
    pub fn record(&mut self, d: usize, fault: Option<&str>) -> bool {
        let max = self.max_faults;
        let others_in_rotation = self
            .devices
            .iter()
            .enumerate()
            .any(|(i, x)| i != d && x.out_of_rotation.is_none());
        let Some(x) = self.devices.get_mut(d) else {
            return false;
        };
        match fault {
            None => {
                x.consecutive_faults = 0;
                false
            }
            Some(reason) => {
                x.consecutive_faults += 1;
                if x.consecutive_faults >= max && x.out_of_rotation.is_none() && !others_in_rotation
                {
                    // The last device stays: without it the study would stop,
                    // and a trial's crash never stops a study.
                    if x.consecutive_faults == max {
                        tracing::warn!(
                            device = %x.budget.name,
                            "{} consecutive trials failed on this device (last: {reason}); \
                             it is the last one in rotation, so it stays",
                            x.consecutive_faults
                        );
                    }
                    false
                } else if x.consecutive_faults >= max && x.out_of_rotation.is_none() {
                    let why = format!(
                        "{} consecutive trials failed on it; last: {reason}",
                        x.consecutive_faults
                    );
                    tracing::warn!(device = %x.budget.name, "device taken out of rotation: {why}");
                    x.out_of_rotation = Some(why);
                    true
                } else {
                    false
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> DeviceSet {
        DeviceSet::new(
            vec![
                DeviceBudget::new("a", 10, 0, 1),
                DeviceBudget::new("b", 20, 2, 1),
            ],
            2,
        )
    }

    #[test]
    fn best_fit_picks_the_tightest_device() {
        let mut s = two();
        assert_eq!(s.place(|c| 8 + c), Some((0, 9)));
        s.reserve(0, 9);
        assert_eq!(s.place(|c| 8 + c), Some((1, 9)), "a is full now");
        assert_eq!(s.place(|c| 20 + c), None, "b has 18 usable");
        assert!(!s.fits_alone(|c| 18 + c));
        assert!(s.fits_alone(|c| 17 + c));
        s.release(0, 9);
        assert_eq!(s.reserved(0), 0);
    }

    #[test]
    fn a_failing_device_leaves_rotation() {
        let mut s = two();
        assert!(!s.record(0, Some("killed by signal 11")));
        assert!(!s.record(0, None), "a success resets the count");
        assert!(!s.record(0, Some("x")));
        assert!(s.record(0, Some("killed by signal 11")));
        assert!(s.out_of_rotation(0).unwrap().contains("signal 11"));
        assert_eq!(s.place(|c| 1 + c), Some((1, 2)));
        assert!(s.any_in_rotation());
        for _ in 0..5 {
            assert!(
                !s.record(1, Some("killed by signal 9")),
                "the last one stays"
            );
        }
        assert!(s.out_of_rotation(1).is_none());
    }
}
