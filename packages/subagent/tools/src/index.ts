export type { AgentDefinitionSource, DefinedSpawn, InlineAgentArguments } from './agent-definition.js'
export { definedSpawn } from './agent-definition.js'
export type { CloseAgentResult } from './close-agent.js'
export {
  CLOSE_AGENT_TOOL_NAME,
  closeAgentDescription,
  closeAgentInputSchema,
  createCloseAgentTool,
  renderCloseAgent,
} from './close-agent.js'
export type { ToolSubagentControlErrorCode } from './errors.js'
export { ToolSubagentControlError } from './errors.js'
export type {
  HarnessInterruptAgentResult,
  HarnessReportResult,
  HarnessSendMessageResult,
} from './harness-control.js'
export {
  createHarnessInterruptAgentTool,
  createHarnessReportTool,
  createHarnessSendMessageTool,
  harnessInterruptAgentDescription,
  harnessInterruptAgentInputSchema,
  harnessReportDescription,
  harnessReportInputSchema,
  harnessSendMessageDescription,
  harnessSendMessageInputSchema,
} from './harness-control.js'
export { harnessNotices, harnessNoticeText, waitForChildSettlement } from './harness-delivery.js'
export type { HarnessSubagentInput, HarnessSubagentResult } from './harness-subagent.js'
export { createHarnessSubagentTool, harnessSubagentDescription, harnessSubagentInputSchema } from './harness-subagent.js'
export type { InterruptAgentResult } from './interrupt-agent.js'
export {
  createInterruptAgentTool,
  INTERRUPT_AGENT_TOOL_NAME,
  interruptAgentDescription,
  interruptAgentInputSchema,
  renderInterruptAgent,
} from './interrupt-agent.js'
export {
  NAME_MAX_CHARS,
  OUTPUT_SCHEMA_MAX_CHARS,
  OUTPUT_SCHEMA_MAX_DEPTH,
  PERSONA_MAX_CHARS,
  RESULT_TEXT_MAX_CHARS,
  TEXT_MAX_CHARS,
  TOOL_NAMES_MAX,
} from './limits.js'
export type {
  ListAgentsCatalog,
  ListAgentsEntry,
  ListAgentsExecuteContext,
  ListAgentsFormat,
  ListAgentsInput,
  ListAgentsResult,
  ListAgentsScope,
  ListAgentsTool,
  ListAgentsToolOptions,
} from './list-agents.js'
export {
  createListAgentsTool,
  LIST_AGENTS_TOOL_NAME,
  listAgentsDescription,
  listAgentsInputSchema,
  listAgentsJsonSchema,
  listAgentsTableDescription,
  parseListAgentsInput,
  renderListAgentsEntries,
  residencyOf,
  toListAgentsEntries,
} from './list-agents.js'
export type { ListAgentsRow, ListAgentsStatus, ListAgentsTableResult } from './list-agents-table.js'
export { renderListAgents, statusOf, toListAgentsRow } from './list-agents-table.js'
export type { ReportResult } from './report.js'
export { createReportTool, REPORT_TOOL_NAME, reportDescription, reportInputSchema } from './report.js'
export type { SendMessageInput, SendMessageResult } from './send-message.js'
export {
  createSendMessageTool,
  renderSendMessage,
  SEND_MESSAGE_TOOL_NAME,
  sendMessageDescription,
  sendMessageInputSchema,
} from './send-message.js'
export type { SubagentToolInput, SubagentToolOptions, SubagentToolResult } from './subagent-tool.js'
export {
  createSubagentTool,
  renderSubagentResult,
  SUBAGENT_TOOL_NAME,
  subagentInputSchema,
  subagentToolDescription,
} from './subagent-tool.js'
export type { SubagentControl, SubagentControlTool, ToolExecuteContext, ToolResult } from './tool.js'
export type { SubagentControlDialect, SubagentControlToolName, SubagentControlToolsOptions } from './tools.js'
export { HARNESS_CONTROL_TOOL_NAMES, SUBAGENT_CONTROL_DIALECTS, SUBAGENT_CONTROL_TOOL_NAMES, subagentControlTools } from './tools.js'
export type { WaitAgentsInput, WaitAgentsResult } from './wait-agents.js'
export {
  boundWaitEntries,
  createWaitAgentsTool,
  renderWaitAgents,
  WAIT_AGENTS_MAX_SECONDS,
  WAIT_AGENTS_TOOL_NAME,
  waitAgentsDescription,
  waitAgentsInputSchema,
} from './wait-agents.js'
