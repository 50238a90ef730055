import { ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions'
import {
  ATTR_GEN_AI_AGENT_ID,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_TOOL_TYPE,
  ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
  GEN_AI_OPERATION_NAME_VALUE_CHAT,
  GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
  GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
} from '@opentelemetry/semantic-conventions/incubating'

/**
 * The attribute names spans carry: the GenAI semantic conventions (pinned
 * with the semantic-conventions package, since they are still incubating)
 * plus dsh's own, under `dsh.`.
 */
export const GEN_AI = {
  operation: ATTR_GEN_AI_OPERATION_NAME,
  provider: ATTR_GEN_AI_PROVIDER_NAME,
  requestModel: ATTR_GEN_AI_REQUEST_MODEL,
  responseModel: ATTR_GEN_AI_RESPONSE_MODEL,
  finishReasons: ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  agentId: ATTR_GEN_AI_AGENT_ID,
  agentName: ATTR_GEN_AI_AGENT_NAME,
  conversationId: ATTR_GEN_AI_CONVERSATION_ID,
  toolName: ATTR_GEN_AI_TOOL_NAME,
  toolCallId: ATTR_GEN_AI_TOOL_CALL_ID,
  toolType: ATTR_GEN_AI_TOOL_TYPE,
  inputTokens: ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  outputTokens: ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  cacheReadTokens: ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  cacheWriteTokens: ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
  reasoningTokens: ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
} as const

export const OPERATION = {
  invokeAgent: GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
  chat: GEN_AI_OPERATION_NAME_VALUE_CHAT,
  executeTool: GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
} as const

export const ERROR_TYPE = ATTR_ERROR_TYPE

export const DSH = {
  sessionId: 'dsh.session.id',
  parentSession: 'dsh.session.parent',
  depth: 'dsh.delegation.depth',
  turn: 'dsh.turn',
  turnEndReason: 'dsh.turn.end_reason',
  runKind: 'dsh.subagent.run_kind',
  compactionId: 'dsh.compaction.id',
  compactionReason: 'dsh.compaction.reason',
} as const
