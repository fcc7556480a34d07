//! What plugins may use of the framework (upstream's `framework.Handle`):
//! their profile's waiting pods, the clock, and state a plugin shares
//! between its instances in every profile.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::clock::Clock;
use super::waiting::WaitingPods;

/// What plugins may use of the framework (upstream's `framework.Handle`).
#[derive(Clone, Default)]
pub struct Handle {
    /// The profile's pods held at Permit.
    pub waiting: Arc<WaitingPods>,
    /// The framework's clock (shared by every profile).
    pub clock: Arc<Clock>,
    /// State a plugin shares between its instances in every profile (one
    /// queue and one cluster serve them all), by type.
    shared: Arc<Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl Handle {
    /// The one `T` of this scheduler: made on first use, the same for
    /// every profile's plugins after that (a plugin's directory of the
    /// objects it follows, such as Coscheduling's PodGroups).
    pub fn shared<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut map = self.shared.lock();
        let any = map
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()))
            .clone();
        any.downcast::<T>()
            .expect("the entry of a type holds that type")
    }

    /// This handle's shared parts with waiting pods of a profile's own.
    pub fn for_profile(&self) -> Self {
        Self {
            waiting: Arc::default(),
            ..self.clone()
        }
    }
}
