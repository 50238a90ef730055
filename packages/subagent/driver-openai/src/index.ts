// The application entry: the driver factory, the top-level agent loop, the
// model client they share, their options and the package's error class.
// Request building, tool plumbing, retry arithmetic and error translation
// are internal (the package's own tests reach them by file); the
// provider-neutral pieces (tool running, notice phrasing, retry arithmetic,
// key redaction, a step's bounds, a request's deadline, the bounded `fetch` and
// error text) are public so other drivers share them.
export type { AgentTurnOutcome, RunAgentOptions } from './agent.js'
export { runAgent } from './agent.js'
export type { BudgetCheck, BudgetCompactionOptions, CompactionSource } from './budget.js'
export { budgetCompaction } from './budget.js'
export type { ModelApi, ModelConfigInput } from './config.js'
export { API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL, DEFAULT_MODEL, MODEL_APIS, MODEL_ENV, redactor } from './config.js'
export type { OpenAIDriverOptions } from './driver.js'
export { createOpenAIDriver } from './driver.js'
export type { DriverOpenAIErrorCode } from './errors.js'
export { DriverOpenAIError } from './errors.js'
export { ASSISTANT_ERROR_EVENT, ASSISTANT_REASONING_EVENT } from './events.js'
export type { DeadlineErrors, RequestDeadline, StepBoundErrors } from './limits.js'
export {
  boundedText,
  brokenAfterOutput,
  ERROR_TEXT_MAX_CHARS,
  fetchWithBoundedErrors,
  notAnEventStream,
  REPLY_HEAD_BYTES,
  REPLY_HEAD_CHARS,
  requestDeadline,
  STEP_MAX_CHARS,
  STEP_MAX_PARTS,
  StepBound,
  sentence,
  TOOL_RESULT_MAX_BYTES,
} from './limits.js'
export type { ModelClient, ModelClientOptions } from './model.js'
export { createModelClient } from './model.js'
export type { Notices } from './notices.js'
export { DEFAULT_NOTICES, phraseNotices } from './notices.js'
export type { AttachmentSource, ContextSource, SessionAttachments } from './requests.js'
export type { RetryPolicy } from './retry.js'
export { defaultBackoff, isRetryableStatus, retryAfterMs } from './retry.js'
export type { OpenAISummarizerOptions } from './summarizer.js'
export { createOpenAISummarizer } from './summarizer.js'
export type { AgentTool, ToolOutcome } from './tools.js'
export { loggedArguments, runTool, toJson } from './tools.js'
export type { ResponseUsage } from './usage.js'
