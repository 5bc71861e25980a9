import MarkdownIt from "markdown-it";

// Tool descriptions are a butler's docstrings, and a module's text is not ours to trust:
// raw HTML in them is shown as text (`html: false` escapes it), links go only to
// http(s)/mailto (markdown-it refuses javascript:, data: and the like), and tables are off
// (their alignment is an inline style, which the page's CSP refuses).
const renderer = new MarkdownIt({ html: false, linkify: false, typographer: false }).disable(["table", "image"]);

const defaultLink =
  renderer.renderer.rules.link_open ??
  ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
renderer.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx].attrSet("rel", "noopener noreferrer");
  tokens[idx].attrSet("target", "_blank");
  return defaultLink(tokens, idx, options, env, self);
};

export function markdownToHtml(text: string): string {
  return renderer.render(text);
}

/** Markdown text (a tool's description) as formatted, inert HTML. */
export function Markdown({ text, className }: { text: string; className?: string }) {
  return <div className={`markdown ${className ?? ""}`.trim()} dangerouslySetInnerHTML={{ __html: markdownToHtml(text) }} />;
}
