/* c */ SELECT 'it''s' -- x
, [a]]b], "q""x" FROM dbo.t WITH (NOLOCK)