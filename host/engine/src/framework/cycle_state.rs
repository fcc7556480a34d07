//! CycleState: per-cycle scratch space, keyed by plugin (upstream's
//! `framework.CycleState`). PreFilter and PreScore write; Filter and Score
//! read, possibly in parallel. It can be cloned (each value clones itself)
//! so that what-if evaluations, such as preemption trying victims on a
//! node, work on a copy.

use std::any::Any;
use std::collections::HashMap;

/// A value kept in the CycleState.
pub trait StateData: Any + Send + Sync {
    fn clone_data(&self) -> Box<dyn StateData>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Send + Sync + Clone> StateData for T {
    fn clone_data(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The cycle's scratch space. Filter and Score read it once per node and
/// plugin, so its keys are hashed with foldhash, not SipHash.
#[derive(Default)]
pub struct CycleState {
    data: HashMap<String, Box<dyn StateData>, foldhash::fast::RandomState>,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        Self {
            data: self
                .data
                .iter()
                .map(|(k, v)| (k.clone(), (**v).clone_data()))
                .collect(),
        }
    }
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<&String> = self.data.keys().collect();
        keys.sort();
        f.debug_struct("CycleState").field("keys", &keys).finish()
    }
}

impl CycleState {
    pub fn write<T: StateData>(&mut self, key: &str, value: T) {
        self.data.insert(key.to_string(), Box::new(value));
    }

    pub fn read<T: StateData>(&self, key: &str) -> Option<&T> {
        self.data
            .get(key)
            .and_then(|b| (**b).as_any().downcast_ref())
    }

    pub fn read_mut<T: StateData>(&mut self, key: &str) -> Option<&mut T> {
        self.data
            .get_mut(key)
            .and_then(|b| (**b).as_any_mut().downcast_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::CycleState;

    #[test]
    fn a_clone_is_independent() {
        let mut s = CycleState::default();
        s.write("a", vec![1, 2]);
        let mut c = s.clone();
        c.read_mut::<Vec<i32>>("a").unwrap().push(3);
        assert_eq!(s.read::<Vec<i32>>("a").unwrap(), &vec![1, 2]);
        assert_eq!(c.read::<Vec<i32>>("a").unwrap(), &vec![1, 2, 3]);
        assert!(s.read::<String>("a").is_none(), "wrong type reads nothing");
    }
}
