module wasmsched.io/examples/spot-affinity

go 1.24

require wasmsched.io/plugin-sdk-go v0.0.0

replace wasmsched.io/plugin-sdk-go => ../../../plugins/sdk-go
