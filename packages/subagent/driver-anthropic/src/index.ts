// The application entry: the driver factory, the top-level agent loop, the
// model client they share, the summarizer, their options and the package's
// error class. Request building, stream assembly, usage mapping and error
// translation are internal (the package's own tests reach them by file).
export type { AgentTurnOutcome, RunAgentOptions } from './agent.js'
export { runAgent } from './agent.js'
export type { AnthropicConfigInput } from './config.js'
export {
  ANTHROPIC_API_KEY_ENV,
  ANTHROPIC_BASE_URL_ENV,
  ANTHROPIC_DEFAULT_BASE_URL,
  ANTHROPIC_DEFAULT_MAX_TOKENS,
  ANTHROPIC_DEFAULT_MODEL,
  ANTHROPIC_MODEL_ENV,
} from './config.js'
export type { AnthropicDriverOptions } from './driver.js'
export { createAnthropicDriver } from './driver.js'
export type { DriverAnthropicErrorCode } from './errors.js'
export { DriverAnthropicError } from './errors.js'
export type { AnthropicClient, AnthropicClientOptions } from './model.js'
export { createAnthropicClient } from './model.js'
export type { AttachmentSource, ContextSource } from './requests.js'
export type { RetryPolicy } from './retry.js'
export type { AnthropicStep, AnthropicToolCall } from './stream.js'
export type { AnthropicSummarizerOptions } from './summarizer.js'
export { createAnthropicSummarizer } from './summarizer.js'
export type { AnthropicUsage } from './usage.js'
