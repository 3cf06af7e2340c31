// Package web holds the browser UI that goai serve ships.
package web

import "embed"

// FS holds index.html.
//
//go:embed index.html
var FS embed.FS
