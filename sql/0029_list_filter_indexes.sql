-- Each filter of a list reads an index of its own, in the list's order (db/engine/pages.ts), so a
-- filtered page reads about as many rows as it returns: the calls of an agent (also the ranges of a
-- key restricted to some agents), the calls of a campaign (most calls have none, and are not in it),
-- the campaigns of an agent.
create index calls_org_mode_agent_created on calls (organization_id, livemode, agent_id, created_at desc, id desc);
create index calls_org_mode_campaign_created on calls (organization_id, livemode, campaign_id, created_at desc, id desc)
  where campaign_id is not null;
create index campaigns_org_mode_agent_created
  on campaigns (organization_id, livemode, agent_id, created_at desc, id desc);
