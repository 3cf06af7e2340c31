package mcpclient

import (
	"encoding/base64"
	"errors"
	"strings"

	"github.com/goai-sdk/goai/agui"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolResult maps an MCP result to what chat.Tool.Execute returns.
func toolResult(res *mcp.CallToolResult) (any, error) {
	if res.IsError {
		msg := strings.TrimSpace(contentText(res.Content))
		if msg == "" {
			msg = "the MCP tool reported an error without a message"
		}
		return nil, errors.New(msg)
	}
	if res.StructuredContent != nil {
		return res.StructuredContent, nil
	}
	var parts []agui.ContentPart
	media := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, agui.ContentPart{Type: "text", Content: c.Text})
		case *mcp.ImageContent:
			media = true
			parts = append(parts, dataPart("image", c.MIMEType, c.Data))
		case *mcp.AudioContent:
			media = true
			parts = append(parts, dataPart("audio", c.MIMEType, c.Data))
		case *mcp.ResourceLink:
			parts = append(parts, agui.ContentPart{Type: "text", Content: linkText(c)})
		case *mcp.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
			case r.Blob != nil:
				media = true
				kind := "document"
				if strings.HasPrefix(r.MIMEType, "image/") {
					kind = "image"
				}
				parts = append(parts, dataPart(kind, r.MIMEType, r.Blob))
			default:
				parts = append(parts, agui.ContentPart{Type: "text", Content: r.Text})
			}
		}
	}
	if media {
		return parts, nil
	}
	return contentText(res.Content), nil
}

func dataPart(kind, mime string, data []byte) agui.ContentPart {
	if mime == "" {
		mime = "application/octet-stream"
	}
	return agui.ContentPart{Type: kind, Source: &agui.Source{Type: "data", Value: base64.StdEncoding.EncodeToString(data), MimeType: mime}}
}

func linkText(l *mcp.ResourceLink) string {
	s := "resource " + l.URI
	if l.Name != "" {
		s += " (" + l.Name + ")"
	}
	if l.Description != "" {
		s += ": " + l.Description
	}
	return s
}

// contentText joins the text of every block, one per line.
func contentText(cs []mcp.Content) string {
	var b strings.Builder
	for _, c := range cs {
		var s string
		switch c := c.(type) {
		case *mcp.TextContent:
			s = c.Text
		case *mcp.ResourceLink:
			s = linkText(c)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				s = c.Resource.Text
			}
		default:
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	return b.String()
}
