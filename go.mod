module github.com/goai-sdk/goai

go 1.26
