module wasmsched.io/plugin-sdk-go

go 1.24
