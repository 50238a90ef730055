export { ToolSubagentControlError } from './errors.js'
export type { ToolSubagentControlErrorCode } from './errors.js'
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
export type { ListAgentsExecuteContext, ListAgentsInput, ListAgentsResult, ListAgentsRow, ListAgentsStatus, ListAgentsTool, SubagentCatalog } from './list-agents.js'
