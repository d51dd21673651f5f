module kis.sandbox/go

go 1.19
