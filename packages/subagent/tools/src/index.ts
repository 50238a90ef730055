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
export type { InterruptAgentResult } from './interrupt-agent.js'
export {
  createInterruptAgentTool,
  INTERRUPT_AGENT_TOOL_NAME,
  interruptAgentDescription,
  interruptAgentInputSchema,
  renderInterruptAgent,
} from './interrupt-agent.js'
export type {
  ListAgentsExecuteContext,
  ListAgentsInput,
  ListAgentsResult,
  ListAgentsRow,
  ListAgentsStatus,
  ListAgentsTool,
  SubagentCatalog,
} from './list-agents.js'
export {
  createListAgentsTool,
  LIST_AGENTS_TOOL_NAME,
  listAgentsDescription,
  listAgentsInputSchema,
  listAgentsJsonSchema,
  parseListAgentsInput,
  renderListAgents,
  statusOf,
  toListAgentsRow,
} from './list-agents.js'
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
export type { SubagentToolInput, SubagentToolResult } from './subagent-tool.js'
export {
  createSubagentTool,
  renderSubagentResult,
  SUBAGENT_TOOL_NAME,
  subagentInputSchema,
  subagentToolDescription,
} from './subagent-tool.js'
export type { SubagentControl, SubagentControlTool, ToolExecuteContext, ToolResult } from './tool.js'
export type { SubagentControlToolName, SubagentControlToolsOptions } from './tools.js'
export { SUBAGENT_CONTROL_TOOL_NAMES, subagentControlTools } from './tools.js'
export type { WaitAgentsInput, WaitAgentsResult } from './wait-agents.js'
export {
  createWaitAgentsTool,
  renderWaitAgents,
  WAIT_AGENTS_MAX_SECONDS,
  WAIT_AGENTS_TOOL_NAME,
  waitAgentsDescription,
  waitAgentsInputSchema,
} from './wait-agents.js'
