// Names for the API's schemas. Every type here comes from schema.d.ts, which is generated
// from the dashboard's OpenAPI schema (`npm run gen:api`); nothing is written by hand.
import type { components } from "./schema";

type S = components["schemas"];

export type ApiResponse<T> = { data: T; meta: S["Meta"] };
export type Paginated<T> = { data: T[]; meta: S["PaginationMeta"] };

export type ApprovalAction = S["ApprovalAction"];
export type ApprovalMetrics = S["ApprovalMetrics"];
export type ApprovalRule = S["ApprovalRule"];
export type AuditEntry = S["AuditEntry"];
export type AuthStatus = S["AuthStatus"];
export type ButlerCard = S["ButlerCard"];
export type ButlerConfig = S["ButlerConfig"];
export type ButlerDetail = S["ButlerDetail"];
export type ButlerSummary = S["ButlerSummary"];
export type CostSummary = S["CostSummary"];
export type DailyCost = S["DailyCost"];
export type Health = S["Health"];
export type Issue = S["Issue"];
export type KubeStatus = S["KubeStatus"];
export type LogTail = S["LogTail"];
export type MCPToolCallResponse = S["MCPToolCallResponse"];
export type ModuleStatus = S["ModuleStatus"];
export type Notification = S["Notification"];
export type NotificationStats = S["NotificationStats"];
export type OAuthCredentials = S["OAuthCredentials"];
export type OAuthStatus = S["OAuthStatus"];
export type Overview = S["Overview"];
export type Schedule = S["Schedule"];
export type ScheduleCost = S["ScheduleCost"];
export type ScheduleCreate = S["ScheduleCreate"];
export type ScheduleDeleted = S["ScheduleDeleted"];
export type ScheduleUpdate = S["ScheduleUpdate"];
export type RotationResult = S["RotationResult"];
export type SearchResults = S["SearchResults"];
export type SecretEntry = S["SecretEntry"];
export type SecretWrite = S["SecretWrite"];
export type SessionDetail = S["SessionDetail"];
export type SessionSummary = S["SessionSummary"];
export type StateEntry = S["StateEntry"];
export type StateWritten = S["StateWritten"];
export type TableInfo = S["TableInfo"];
export type TickResult = S["TickResult"];
export type TimelineEvent = S["TimelineEvent"];
export type ToolCallRecord = S["ToolCallRecord"];
export type ToolInfo = S["ToolInfo"];
export type TopSession = S["TopSession"];
export type TraceDetail = S["TraceDetail"];
export type TraceSpan = S["TraceSpan"];
export type TraceSummary = S["TraceSummary"];
export type TriggerRequest = S["TriggerRequest"];
export type TriggerResult = S["TriggerResult"];
export type JsonValue = S["JsonValue"];
export type LlmCallInfo = S["LlmCallInfo"];
// The API's one session status vocabulary (an enum in the schema).
export type SessionStatus = S["SessionSummary"]["status"];
export type TriageRule = S["TriageRule"];
export type TriageRuleCreate = S["TriageRuleCreate"];
export type TriageRuleUpdate = S["TriageRuleUpdate"];
export type TriageRuleDeleted = S["TriageRuleDeleted"];
export type TriageTest = S["TriageTest"];
export type TriageTestResult = S["TriageTestResult"];
export type ThreadAffinitySettings = S["ThreadAffinitySettings"];
export type ThreadAffinityUpdate = S["ThreadAffinityUpdate"];
export type ThreadOverride = S["ThreadOverride"];
export type ThreadUnpinned = S["ThreadUnpinned"];
