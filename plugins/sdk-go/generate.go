package sdk

//go:generate go run ./internal/gencontract
