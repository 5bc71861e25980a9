export function Pager({
  offset,
  limit,
  total,
  hasMore,
  onChange,
  label = "results",
}: {
  offset: number;
  limit: number;
  total: number | null | undefined;
  hasMore: boolean;
  onChange: (offset: number) => void;
  label?: string;
}) {
  const first = total === 0 ? 0 : offset + 1;
  const last = offset + limit;
  return (
    <nav className="pager" aria-label={`Pages of ${label}`}>
      <button type="button" onClick={() => onChange(Math.max(0, offset - limit))} disabled={offset === 0}>
        Previous page
      </button>
      <span>
        {first}–{total !== null && total !== undefined ? Math.min(last, total) : last}
        {total !== null && total !== undefined ? ` of ${total}` : ""}
      </span>
      <button type="button" onClick={() => onChange(offset + limit)} disabled={!hasMore}>
        Next page
      </button>
    </nav>
  );
}
