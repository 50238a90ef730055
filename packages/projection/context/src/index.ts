export { PRUNED_RESULT_TEXT } from './draft.js'
export type { SessionContextErrorCode } from './errors.js'
export { SessionContextError } from './errors.js'
export { registerSessionContextUnit, sessionContextPlugin } from './plugin.js'
export type {
  AnthropicBlock,
  AnthropicMessage,
  AnthropicPart,
  AnthropicRenderOptions,
  AnthropicRequest,
} from './render/anthropic.js'
export { anthropicPart, anthropicRenderer, renderAnthropic, renderAnthropicParts } from './render/anthropic.js'
export type { ChatMessage, ChatRenderOptions, ChatRequest, ChatToolCall, ChatUserPart } from './render/chat.js'
export { chatMessage, chatRenderer, renderChat, renderChatMessages } from './render/chat.js'
export type {
  AttachmentBytes,
  AttachmentResolver,
  IncrementalRenderer,
  Rendered,
  RenderOptions,
  RenderStats,
  RenderWarning,
  RenderWarnings,
  WarningCounts,
} from './render/common.js'
export { RENDER_WARNINGS } from './render/common.js'
export type {
  PreviousResponse,
  ResponsesContent,
  ResponsesItem,
  ResponsesRenderOptions,
  ResponsesRequest,
} from './render/responses.js'
export { firstUnsent, renderResponses, responsesItems, responsesRenderer } from './render/responses.js'
export { sessionContextStateSchema } from './schema.js'
export type {
  ContextTarget,
  SessionContextMetrics,
  SessionContextService,
  SessionContextServiceOptions,
  SessionRecordRef,
} from './service.js'
export { createSessionContextService, DEFAULT_CONTEXT_MEMO } from './service.js'
export type {
  ContextBlock,
  ContextMessage,
  ContextRole,
  ContextStep,
  ContextSummaryMark,
  ContextWarnings,
  FoldWarning,
  OpenAssistant,
  OpenCompaction,
  SessionContext,
  SessionContextState,
  UnknownBlock,
  ViewWarning,
} from './types.js'
export { FOLD_WARNINGS, SESSION_CONTEXT_KEY, VIEW_WARNINGS } from './types.js'
export { applyContextEvent, SESSION_CONTEXT_STATE_VERSION, sessionContextUnit } from './unit.js'
export { contextView, MISSING_RESULT_TEXT } from './view.js'
