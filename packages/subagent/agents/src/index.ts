export type { AgentDefinitions, AgentDefinitionsOptions, AgentDirectory, ListedAgentDefinition } from './catalog.js'
export { agentDefinitions, agentDirectories, checkAgentName } from './catalog.js'
export type { AgentDefinitionErrorCode } from './errors.js'
export { AgentDefinitionError } from './errors.js'
export type { FrontmatterProblem, FrontmatterSplit } from './frontmatter.js'
export { splitFrontmatter } from './frontmatter.js'
export type { DefinitionSource } from './parse.js'
export { parseAgentDefinition } from './parse.js'
export type { AgentBudgets, AgentDefinition, AgentDefinitionScope, AgentFrontmatter, AgentProvider } from './schema.js'
export {
  AGENT_NAME_PATTERN,
  AGENT_PROVIDERS,
  agentBudgetsSchema,
  agentFrontmatterSchema,
  MAX_DEFINITION_BYTES,
  MAX_DEFINITIONS_PER_DIRECTORY,
} from './schema.js'
