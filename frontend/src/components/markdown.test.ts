import { describe, expect, it } from "vitest";

import { markdownToHtml } from "./Markdown";

describe("markdownToHtml", () => {
  it("formats code spans, emphasis and lists", () => {
    const html = markdownToHtml("Log a `weight` in **kg**:\n\n- one\n- two");
    expect(html).toContain("<code>weight</code>");
    expect(html).toContain("<strong>kg</strong>");
    expect(html).toContain("<li>one</li>");
    expect(html).not.toContain("`");
  });

  it("shows raw HTML as text, never as markup", () => {
    const html = markdownToHtml('Hi <img src=x onerror="alert(1)"> <script>alert(2)</script>');
    expect(html).not.toMatch(/<img|<script/);
    expect(html).toContain("&lt;img");
    expect(html).toContain("&lt;script&gt;");
  });

  it("refuses script links and opens others in a new tab without an opener", () => {
    expect(markdownToHtml("[x](javascript:alert(1))")).not.toContain("href");
    const html = markdownToHtml("[docs](https://example.org/a)");
    expect(html).toContain('href="https://example.org/a"');
    expect(html).toContain('rel="noopener noreferrer"');
  });
});
