//! DefaultBinder: binds the pod through `pods/binding` (upstream's
//! default Bind plugin).

use std::sync::Arc;

use crate::framework::{BindAction, BindPlugin, CycleState, Plugin, PluginBundle, PluginError};
use crate::model::Pod;

pub const NAME: &str = "DefaultBinder";

#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultBinder;

impl Plugin for DefaultBinder {
    fn name(&self) -> &str {
        NAME
    }
}

impl BindPlugin for DefaultBinder {
    fn bind(
        &self,
        _pod: &Pod,
        _state: &CycleState,
        _node: &str,
    ) -> Result<Option<Vec<BindAction>>, PluginError> {
        Ok(Some(vec![BindAction::Bind]))
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(DefaultBinder);
    Ok(PluginBundle::new(p.clone()).with_bind(&p))
}
