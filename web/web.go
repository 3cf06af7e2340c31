// Package web holds the browser UI that goai serve ships: index.html,
// app.js and app.css, embedded, with no build step.
package web

import "embed"

// FS holds the page.
//
//go:embed index.html app.js app.css
var FS embed.FS
