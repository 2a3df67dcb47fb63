"""Owners of adjacent property within 1/2 mile (Dovre 6.F) in the site configuration
([[sites.adjoining_owners]]): blast-notice recipients besides the Town."""

from __future__ import annotations

import pytest

from monitor.config import parse_config
from monitor.errors import ConfigError
from rules.model import AdjoiningOwner, TownContact
from tests.support.config_samples import MINIMAL

SITE = MINIMAL  # one site with one sound meter


def test_adjoining_owners_reach_the_rules_context() -> None:
    config = parse_config(
        SITE
        + """
[[sites.adjoining_owners]]
id = "p-12"
name = "Hansen residence"
parcel = "012-0412-00"
[[sites.adjoining_owners]]
id = "p-14"
"""
    )
    assert config.sites[0].context().adjoining_owners == (
        AdjoiningOwner("p-12", "Hansen residence", "012-0412-00"),
        AdjoiningOwner("p-14"),
    )


def test_no_adjoining_owners_is_allowed() -> None:
    assert parse_config(SITE).sites[0].context().adjoining_owners == ()


@pytest.mark.parametrize(
    ("owners", "message"),
    [
        (
            '[[sites.adjoining_owners]]\nid = "p-12"\n[[sites.adjoining_owners]]\nid = "p-12"\n',
            "duplicate owner id",
        ),
        ('[[sites.adjoining_owners]]\nname = "Hansen"\n', "sites[0].adjoining_owners[0].id"),
        ('[[sites.adjoining_owners]]\nid = "p-12"\nphone = "555"\n', "phone: unknown key"),
    ],
)
def test_adjoining_owner_mistakes_name_the_key(owners: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(SITE + owners)
    assert message in str(caught.value)


def test_town_contacts_reach_the_rules_context() -> None:
    """Issue 27: the Town's notice contacts are identities with ids, like the owners."""
    config = parse_config(
        SITE + '[[sites.town_contacts]]\nid = "town-clerk"\nname = "Town of Dovre clerk"\n'
        '[[sites.town_contacts]]\nid = "town-chair"\n'
    )
    assert config.sites[0].context().town_contacts == (
        TownContact("town-clerk", "Town of Dovre clerk"),
        TownContact("town-chair"),
    )


@pytest.mark.parametrize(
    ("contacts", "message"),
    [
        (
            '[[sites.town_contacts]]\nid = "c"\n[[sites.town_contacts]]\nid = "c"\n',
            "sites[0].town_contacts[1].id: 'c' is already the id of another town contact or adjoining owner",
        ),
        (
            '[[sites.adjoining_owners]]\nid = "p-12"\n[[sites.town_contacts]]\nid = "p-12"\n',
            "sites[0].town_contacts[0].id: 'p-12' is already the id",
        ),
        ('[[sites.town_contacts]]\nname = "Clerk"\n', "sites[0].town_contacts[0].id"),
        ('[[sites.town_contacts]]\nid = "c"\nemail = "x"\n', "email: unknown key"),
    ],
)
def test_town_contact_mistakes_name_the_key(contacts: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(SITE + contacts)
    assert message in str(caught.value)
